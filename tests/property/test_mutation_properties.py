"""(c) Mutation plans are idempotent and never overwrite what a pod already carries."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.config import Config
from gangkeeper.policies.model import Gang, PodMembership, Role, Source
from gangkeeper.policies.mutation import plan_pod

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
