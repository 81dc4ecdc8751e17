"""(c) Mutation plans are idempotent and never overwrite what a pod already carries,
and the JSONPatch the webhook sends makes exactly the planned pod."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.admission.mutation import MutationPlan, plan_pod
from gangkeeper.policies.admission.plan_memo import PlanMemo, shape_key
from gangkeeper.policies.model import Gang, PodMembership, Role, Source
from gangkeeper.policies.settings.config import Config

# See test_feasibility_properties: keeps Hypothesis' failure report from crashing.
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)

KEYS = st.sampled_from(
    [
        "app",
        "gangkeeper.io/gang",
        "gangkeeper.io/role",
        "gangkeeper.io/min-member",
        "gangkeeper.io/gang-name",
        "scheduling.x-k8s.io/pod-group",
        "scheduling.k8s.io/group-name",
        "kueue.x-k8s.io/pod-group-name",
        "team",
    ]
)
VALUES = st.sampled_from(["x", "train", "llama-ft", "1", ""])
NAMES = st.one_of(
    st.sampled_from(["llama-ft", "a", "x" * 70, "Job_With.Odd-Chars", "-dash-"]),
    st.text(alphabet="abcXYZ-_./ 0", min_size=1, max_size=80),
)


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    scheduler = draw(
        st.sampled_from([None, "", "default-scheduler", "volcano", "scheduler-plugins-scheduler"])
    )
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if draw(st.booleans()):
        spec["schedulingGates"] = draw(
            st.sampled_from([[], [{"name": "other.io/gate"}], [{"name": "gangkeeper.io/gang"}]])
        )
    metadata: dict[str, Any] = {"name": "p", "namespace": draw(st.sampled_from(["a", "b"]))}
    if draw(st.booleans()):
        metadata["labels"] = draw(st.dictionaries(KEYS, VALUES, max_size=3))
    if draw(st.booleans()):
        metadata["annotations"] = draw(st.dictionaries(KEYS, VALUES, max_size=3))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@st.composite
def memberships(draw: st.DrawFn) -> PodMembership:
    name = draw(NAMES)
    role = draw(st.sampled_from(["worker", "master", "Launcher_0", "r" * 70]))
    gang = Gang(
        "a",
        name,
        draw(st.integers(0, 64)),
        (Role(role, 4, {"nvidia.com/gpu": 1}),),
        Source("batch/v1", "Job", "a", name, "uid"),
    )
    return PodMembership(gang, role)


configs = st.builds(
    Config,
    backend=st.sampled_from(["gate", "coscheduling", "volcano", "native"]),
    namespace_backends=st.sampled_from([{}, {"b": "volcano"}, {"a": "native"}]),
    on_conflict=st.sampled_from(["skip", "reject"]),
)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(pod=pods(), membership=memberships(), config=configs)
def test_planning_again_on_the_result_adds_nothing(
    pod: dict[str, Any], membership: PodMembership, config: Config
) -> None:
    namespace = pod["metadata"]["namespace"]
    original = copy.deepcopy(pod)
    plan = plan_pod(pod, membership, config, namespace)
    once = plan.apply(pod)
    assert pod == original  # apply works on a copy
    again = plan_pod(once, membership, config, namespace)
    assert not again.changes
    assert again.apply(once) == once
    if not plan.changes:
        assert once == pod


@settings(max_examples=80, deadline=None, derandomize=True)
@given(pod=pods(), membership=memberships(), config=configs)
def test_values_already_present_are_never_changed(
    pod: dict[str, Any], membership: PodMembership, config: Config
) -> None:
    result = plan_pod(pod, membership, config, pod["metadata"]["namespace"]).apply(pod)
    for where in ("labels", "annotations"):
        for key, value in (pod["metadata"].get(where) or {}).items():
            assert result["metadata"][where][key] == value
    if pod["spec"].get("schedulerName") not in (None, "", "default-scheduler"):
        assert result["spec"]["schedulerName"] == pod["spec"]["schedulerName"]
    for gate in pod["spec"].get("schedulingGates", []):
        assert gate in result["spec"]["schedulingGates"]
    labels = result["metadata"].get("labels") or {}
    for value in labels.values():
        assert len(value) <= 63


JUNK = st.sampled_from(["x", 3, [], None, [{"name": "other.io/gate"}], {}])


@st.composite
def odd_pods(draw: st.DrawFn) -> dict[str, Any]:
    """`pods()` with any part the plan touches absent, empty or of the wrong type."""
    pod = draw(pods())
    metadata, spec = pod["metadata"], pod["spec"]
    # Copies: a JSON document never holds one object in two places.
    junk = lambda: copy.deepcopy(draw(JUNK))  # noqa: E731
    for where in ("labels", "annotations"):
        if draw(st.booleans()):
            metadata[where] = junk()
    for key in ("schedulingGates", "schedulingGroup", "schedulerName"):
        if draw(st.booleans()):
            spec[key] = copy.deepcopy(draw(JUNK | st.just({"podGroupName": "theirs"})))
    choice = draw(st.integers(0, 7))
    if choice == 0:
        del pod["metadata"]  # the API server may send a pod without it
    elif choice == 1:
        pod["metadata"] = junk()
    choice = draw(st.integers(0, 5))
    if choice == 0:
        del pod["spec"]
    elif choice == 1:
        pod["spec"] = junk()
    return pod


plans = st.builds(
    MutationPlan,
    outcome=st.just("mutate"),
    backend=st.sampled_from(["gate", "coscheduling", "volcano", "native"]),
    labels=st.dictionaries(KEYS, VALUES, max_size=3),
    annotations=st.dictionaries(KEYS | st.just("a~b/c"), VALUES, max_size=3),
    scheduler_name=st.sampled_from([None, "volcano", "default-scheduler"]),
    add_gate=st.booleans(),
    pod_group_name=st.sampled_from([None, "g"]),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(pod=odd_pods(), plan=plans)
def test_the_json_patch_makes_exactly_the_planned_pod(
    pod: dict[str, Any], plan: MutationPlan
) -> None:
    original = copy.deepcopy(pod)
    ops = plan.json_patch(pod)
    assert pod == original
    assert jsonpatch.apply_patch(pod, ops) == plan.apply(pod)
    for op in ops:
        assert op["path"].startswith(("/metadata", "/spec")), op
        if op["op"] == "replace":
            # Only a value of the wrong type is ever replaced, never a map of keys
            # or a list of gates someone else put there.
            before = jsonpatch.JsonPointer(op["path"]).resolve(pod)
            if op["path"] in ("/metadata", "/metadata/labels", "/metadata/annotations", "/spec"):
                assert not isinstance(before, dict), op
            if op["path"] == "/spec/schedulingGates":
                assert not isinstance(before, list), op
            if op["path"] == "/spec/schedulingGroup":
                assert not before, op


@settings(max_examples=150, deadline=None, derandomize=True)
@given(pod=pods(), membership=memberships(), config=configs)
def test_the_json_patch_of_a_real_plan_keeps_every_existing_key_and_gate(
    pod: dict[str, Any], membership: PodMembership, config: Config
) -> None:
    plan = plan_pod(pod, membership, config, pod["metadata"]["namespace"])
    ops = plan.json_patch(pod)
    assert jsonpatch.apply_patch(pod, ops) == plan.apply(pod)
    for op in ops:
        # Additions only, except an empty or default schedulerName taking the backend's.
        assert op["op"] == "add" or (
            op["path"] == "/spec/schedulerName"
            and pod["spec"]["schedulerName"] in ("", "default-scheduler")
        ), op
    assert (ops == []) == (not plan.changes)


@st.composite
def unread_changes(draw: st.DrawFn, pod: dict[str, Any]) -> dict[str, Any]:
    """`pod` with parts that planning does not read changed (name, owner, containers)."""
    variant = copy.deepcopy(pod)
    metadata = variant.get("metadata")
    if isinstance(metadata, dict):
        metadata["name"] = draw(st.sampled_from(["p", "worker-7", "launcher"]))
        metadata["ownerReferences"] = [{"kind": "Job", "name": draw(NAMES), "controller": True}]
    spec = variant.get("spec")
    if isinstance(spec, dict):
        spec["containers"] = [{"name": "c", "image": draw(st.sampled_from(["i", "j:2"]))}]
        spec["hostname"] = draw(st.sampled_from(["h0", "h1"]))
    return variant


TWEAK_LIST: list[tuple[str, str, Any]] = [
    ("labels", "team", "x"), ("labels", "gangkeeper.io/gang", "train"),
    ("labels", "kueue.x-k8s.io/pod-group-name", "g"), ("annotations", "team", "1"),
    ("annotations", "scheduling.k8s.io/group-name", "g"), ("annotations", "volcano.sh/x", "y"),
    ("annotations", "gangkeeper.io/min-member", "1"), ("spec", "schedulerName", "volcano"),
    ("spec", "schedulerName", "default-scheduler"), ("spec", "schedulerName", None),
    ("spec", "nodeName", "node-1"), ("spec", "workloadRef", {"name": "w"}),
    ("spec", "schedulingGroup", {"podGroupName": "theirs"}),
    ("spec", "schedulingGroup", {}), ("spec", "schedulingGroup", {"podGroupName": None}),
    ("gates", "gangkeeper.io/gang", None),
    ("gates", "other.io/gate", None), ("gates", "other.io/gate", None),
    ("drop", "labels", None), ("drop", "annotations", None),
]
TWEAKS = st.sampled_from(TWEAK_LIST)


def tweaked(pod: dict[str, Any], tweaks: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """`pod` with some parts that planning reads changed."""
    pod = copy.deepcopy(pod)
    metadata, spec = pod["metadata"], pod["spec"]
    for where, key, value in tweaks:
        if where in ("labels", "annotations"):
            metadata.setdefault(where, {})[key] = value
        elif where == "spec":
            spec[key] = copy.deepcopy(value)
        elif where == "gates":
            spec.setdefault("schedulingGates", []).append({"name": key})
        else:
            metadata.pop(key, None)
    return pod


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    data=st.data(),
    bases=st.lists(pods(), min_size=1, max_size=2),
    steps=st.lists(
        st.tuples(st.integers(0, 1), st.lists(TWEAKS, max_size=3), st.booleans(),
                  st.integers(0, 2)),
        min_size=1, max_size=16,
    ),
    membership=memberships(),
    config=configs,
)
def test_the_plan_memo_answers_as_fresh_planning_does_for_any_sequence_of_pods(
    data: st.DataObject,
    bases: list[dict[str, Any]],
    steps: list[tuple[int, list[tuple[str, str, Any]], bool, int]],
    membership: PodMembership,
    config: Config,
) -> None:
    # Pods made from one or two bases by small changes to what planning reads, for
    # one gang and config, through a small memo: answers are reused, and a key that
    # missed any of those parts would hand one pod another's plan.
    memo = PlanMemo(size=6)
    gang = membership.gang
    # The same gang in another role, and another gang of the same name.
    other = Gang(gang.namespace, gang.name, gang.min_member + 1, gang.roles,
                 Source("batch/v1", "Job", gang.namespace, gang.name, "uid-2"))
    members = [membership, PodMembership(gang, "launcher"), PodMembership(other, membership.role)]
    for base, tweaks, vary, member in steps:
        membership = members[member]
        pod = tweaked(bases[base % len(bases)], tweaks)
        if vary:
            pod = data.draw(unread_changes(pod))
        original = copy.deepcopy(pod)
        namespace = pod["metadata"]["namespace"]
        plan, ops = memo.plan(pod, membership, config, namespace)
        fresh = plan_pod(pod, membership, config, namespace)
        assert plan == fresh
        assert ops == fresh.json_patch(pod)
        assert pod == original


@settings(max_examples=150, deadline=None, derandomize=True)
@given(pod=odd_pods(), membership=memberships(), config=configs)
def test_the_plan_memo_plans_pods_of_any_shape_as_fresh_planning_does(
    pod: dict[str, Any], membership: PodMembership, config: Config
) -> None:
    memo = PlanMemo()
    namespace = "a"
    for _ in range(2):  # the second answer may come from memory
        plan, ops = memo.plan(pod, membership, config, namespace)
        fresh = plan_pod(pod, membership, config, namespace)
        assert plan == fresh
        assert ops == fresh.json_patch(pod)


@pytest.mark.parametrize("backend", ["gate", "coscheduling", "volcano", "native"])
@pytest.mark.parametrize("on_conflict", ["skip", "reject"])
def test_pods_planned_differently_never_share_a_shape_key(backend: str, on_conflict: str) -> None:
    # Every pair of changes to what planning reads, on a few bases: two pods with the
    # same key must have the same plan and patch, or the memo would mix them up.
    gang = Gang("a", "train", 4, (Role("worker", 4, {"nvidia.com/gpu": 1}),),
                Source("batch/v1", "Job", "a", "train", "uid"))
    membership = PodMembership(gang, "worker")
    config = Config(backend=backend, on_conflict=on_conflict)  # type: ignore[arg-type]
    spec = {"containers": [{"name": "c", "image": "i"}]}
    bases = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"},
         "spec": copy.deepcopy(spec)},
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": "p", "namespace": "a", "labels": {"app": "x"},
                      "annotations": {"note": "n"}},
         "spec": {**copy.deepcopy(spec), "schedulingGates": [{"name": "other.io/gate"}]}},
    ]
    tweaks = TWEAK_LIST
    seen: dict[Any, tuple[MutationPlan, list[dict[str, Any]]]] = {}
    keyed = 0
    for base in bases:
        for first in [None, *tweaks]:
            for second in [None, *tweaks]:
                pod = tweaked(base, [t for t in (first, second) if t is not None])
                key = shape_key(pod, membership, config, "a")
                if key is None:
                    continue
                keyed += 1
                plan = plan_pod(pod, membership, config, "a")
                answer = (plan, plan.json_patch(pod))
                assert seen.setdefault(key, answer) == answer, (first, second)
    assert keyed > 500  # the pairs were really compared, not all skipped
