"""The registry and its entry points: every kind registered once, junk never crashes
(recognizers/registry.py, recognizers/base.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders.workloads import (
    Lookup,
    gang_annotations,
    job,
    jobset,
    jobset_pod,
    leader_worker_set,
    lws_pod,
    no_lookup,
    pod,
    pod_from,
    podgroup,
    replicated_job,
    training_job,
    training_pod,
    training_runtime,
    trainjob,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.model import PodMembership
from gangkeeper.policies.recognizers.base import DuplicateRecognizer, Registry
from gangkeeper.policies.recognizers.job import JobRecognizer
from gangkeeper.policies.recognizers.owner_gangs import OwnerGangs
from gangkeeper.policies.recognizers.registry import (
    default_registry,
    recognize_object,
    recognize_pod,
)
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_default_registry_holds_every_kind_once() -> None:
    names = default_registry().names()
    assert len(names) == len(set(names))
    assert set(names) == {
        "annotations",
        "job",
        "jobset",
        "trainjob",
        "pytorchjob",
        "tfjob",
        "mpijob",
        "xgboostjob",
        "paddlejob",
        "jaxjob",
        "leaderworkerset",
        "raycluster",
        "rayjob",
        "rayservice",
        "volcano-podgroup",
        "coscheduling-podgroup",
        "kueue-podgroup",
    }
    # the explicit-annotations fallback is asked last
    assert names[-1] == "annotations"


def test_webhook_rules_name_each_resource_once() -> None:
    rules = [(r.group, r.resource) for rec in default_registry() for r in rec.rules]
    assert len(rules) == len(set(rules))
    assert ("batch", "jobs") in rules
    assert ("trainer.kubeflow.org", "trainjobs") in rules
    assert ("leaderworkerset.x-k8s.io", "leaderworkersets") in rules


def test_a_registry_refuses_a_name_twice() -> None:
    registry = Registry()
    registry.register(JobRecognizer())
    with pytest.raises(DuplicateRecognizer):
        registry.register(JobRecognizer())


def test_a_custom_registry_limits_what_is_recognised() -> None:
    registry = Registry()
    registry.register(JobRecognizer())
    owner = job("train", parallelism=3)
    assert len(recognize_object(owner, no_lookup, CONFIG, registry)) == 1
    member = pod_from(owner["spec"]["template"], "p", owner=owner)
    assert recognize_pod(member, Lookup(owner), CONFIG, registry) is not None
    empty = Registry()
    assert recognize_object(owner, no_lookup, CONFIG, empty) == []


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        "Job",
        42,
        {},
        {"kind": "Job"},
        {"apiVersion": "batch/v1"},
        {"apiVersion": 1, "kind": "Job"},
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "spec": "junk"},
        {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"replicas": 100}},
        {"apiVersion": "batch/v2", "kind": "Other"},
    ],
)
def test_junk_and_unknown_kinds_are_not_gangs(obj: Any) -> None:
    assert recognize_object(obj, no_lookup, CONFIG) == []
    assert recognize_pod(obj, no_lookup, CONFIG) is None


def test_an_owner_lookup_is_asked_each_question_once_per_call() -> None:
    owner = job("train", parallelism=3)
    member = pod_from(owner["spec"]["template"], "p", owner=owner)
    lookup = Lookup(owner)
    assert recognize_pod(member, lookup, CONFIG) is not None
    assert len(lookup.asked) == len(set(lookup.asked))


def test_an_owner_reference_loop_ends() -> None:
    a = job("a", parallelism=2)
    b = job("b", parallelism=2, owner=a)
    a["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "b", "uid": "", "controller": True}
    ]
    member = pod_from(a["spec"]["template"], "p", owner=a)
    recognize_pod(member, Lookup(a, b), CONFIG)  # returns, whatever it decides


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
KINDS = [
    ("v1", "Pod"),
    ("batch/v1", "Job"),
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    ("kubeflow.org/v1", "PyTorchJob"),
    ("kubeflow.org/v2beta1", "MPIJob"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ("apps/v1", "StatefulSet"),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(KINDS),
    metadata=json_values,
    spec=json_values,
    owned=st.booleans(),
)
def test_a_known_kind_with_random_fields_is_recognised_or_an_invalid_object(
    kind: tuple[str, str], metadata: Any, spec: Any, owned: bool
) -> None:
    obj = {"apiVersion": kind[0], "kind": kind[1], "metadata": metadata, "spec": spec}

    def lookup(api_version: str, k: str, namespace: str, name: str) -> Any:
        return spec if owned else None

    try:
        recognize_object(obj, lookup, CONFIG)
        recognize_pod(obj, lookup, CONFIG)
    except InvalidObject as error:
        assert str(error)


def _example_documents() -> list[tuple[str, list[Any]]]:
    return [
        (path.name, [d for d in yaml.safe_load_all(path.read_text()) if d])
        for path in sorted(EXAMPLES.glob("*-*.yaml"))
    ]


@pytest.mark.parametrize(("name", "docs"), _example_documents())
def test_every_example_workload_is_recognised_as_a_gang(name: str, docs: list[Any]) -> None:
    lookup = Lookup(*[d for d in docs if "Runtime" in d["kind"]])
    workloads = [d for d in docs if "Runtime" not in d["kind"]]
    assert workloads, name
    for doc in workloads:
        gangs = recognize_object(doc, lookup, CONFIG)
        assert gangs, f"{name}: {doc['kind']} {doc['metadata']['name']} is not a gang"
        assert all(g.min_member >= 2 for g in gangs)


def _valid_objects() -> list[tuple[Any, Lookup]]:
    runtime = training_runtime()
    lws = leader_worker_set()
    js = jobset("js", replicated_job("d", 1, 1, 0), replicated_job("w", 2, 2, 1))
    js_pod, js_job = jobset_pod(js, "w")
    pj = training_job("PyTorchJob", "pt")
    return [
        (job("j", parallelism=3), Lookup()),
        (js, Lookup()),
        (js_pod, Lookup(js, js_job)),
        (trainjob("tj", num_nodes=2, gpus_per_node=1), Lookup(runtime)),
        (pj, Lookup()),
        (training_pod(pj, "Worker"), Lookup(pj)),
        (lws, Lookup()),
        (lws_pod(lws, 1, 2), Lookup(lws)),
        (lws_pod(lws, 1, 2), Lookup()),
        (podgroup("volcano", "pg", 4, {"nvidia.com/gpu": 8}), Lookup()),
        (pod("a", annotations=gang_annotations("g", 3)), Lookup()),
        (
            pod(
                "k",
                labels={"kueue.x-k8s.io/pod-group-name": "g"},
                annotations={"kueue.x-k8s.io/pod-group-total-count": "3"},
            ),
            Lookup(),
        ),
    ]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


VALID = _valid_objects()
junk_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True),
    st.sampled_from(["", "1.5", "500m", "-1", "²", "x", "Always", "Complete", "1e99"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "name", "nvidia.com/gpu"]), st.integers(), max_size=2),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), junk=junk_values)
def test_any_single_field_replaced_by_junk_never_crashes(data: st.DataObject, junk: Any) -> None:
    original, lookup = data.draw(st.sampled_from(VALID))
    obj = copy.deepcopy(original)
    path = data.draw(st.sampled_from(_paths(obj)))
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = junk
    try:
        recognize_object(obj, lookup, CONFIG)
        recognize_pod(obj, lookup, CONFIG)
    except InvalidObject as error:
        # a clear error names a field
        assert error.message


#: The owners' gangs memo these tests decide with, as the server has its own.
OWNERS = OwnerGangs()


def _versioned_job(version: str, parallelism: int) -> Any:
    owner = job("train", parallelism=parallelism)
    owner["metadata"]["resourceVersion"] = version
    return owner


def _member_of(owner: Any, name: str = "a") -> PodMembership | None:
    """How a pod `name` of the owner's template is recognised, the owner known."""
    return recognize_pod(pod_from(owner["spec"]["template"], name, owner=owner),
                         Lookup(owner), CONFIG, owners=OWNERS)


def test_the_gang_of_an_api_object_is_remembered_per_resource_version() -> None:
    owner = _versioned_job("100", 4)
    first = _member_of(owner, "a")
    second = _member_of(owner, "b")
    assert first is not None and second is not None
    assert second.gang is first.gang


def test_a_new_resource_version_is_read_again() -> None:
    _member_of(_versioned_job("200", 4))
    membership = _member_of(_versioned_job("201", 6))
    assert membership is not None
    assert membership.gang.min_member == 6


def test_objects_without_a_resource_version_are_never_remembered() -> None:
    owner = job("train", parallelism=4)
    member = pod_from(owner["spec"]["template"], "a", owner=owner)
    first = recognize_pod(member, Lookup(owner), CONFIG, owners=OWNERS)
    owner["spec"]["parallelism"] = 5
    second = recognize_pod(member, Lookup(owner), CONFIG, owners=OWNERS)
    assert first is not None and second is not None
    assert (first.gang.min_member, second.gang.min_member) == (4, 5)


def test_a_different_object_reusing_uid_and_version_is_read_afresh() -> None:
    _member_of(_versioned_job("300", 4))
    membership = _member_of(_versioned_job("300", 7))
    assert membership is not None
    assert membership.gang.min_member == 7


# --- API versions: each recogniser reads only the versions it knows ----------------


def _versioned(obj: dict[str, Any], version: str) -> dict[str, Any]:
    group = obj["apiVersion"].rpartition("/")[0]
    return {**copy.deepcopy(obj), "apiVersion": f"{group}/{version}" if group else version}


@pytest.mark.parametrize(
    ("obj", "version", "supported"),
    [
        (jobset("js", replicated_job("w", 1, 4)), "v1beta7", "jobset.x-k8s.io/v1alpha2"),
        (training_job("TFJob", "tf", {"Worker": (4, 1)}), "v1alpha2", "kubeflow.org/v1"),
        (training_job("PyTorchJob", "pt", {"Worker": (4, 1)}), "v2", "kubeflow.org/v1"),
        (
            training_job("MPIJob", "mpi", {"Worker": (4, 1)}),
            "v1alpha1",
            "kubeflow.org/v1, kubeflow.org/v2beta1",
        ),
        (job("j", parallelism=4), "v2", "batch/v1"),
        (leader_worker_set("l", size=4), "v1beta1", "leaderworkerset.x-k8s.io/v1"),
        (podgroup("coscheduling", "pg", 4), "v1alpha2", "scheduling.x-k8s.io/v1alpha1"),
        (trainjob("tj", "torch", num_nodes=4), "v1", "trainer.kubeflow.org/v1alpha1"),
    ],
    ids=lambda v: v if isinstance(v, str) else v["kind"],
)
def test_an_unknown_version_of_a_known_kind_is_an_error_naming_both(
    obj: dict[str, Any], version: str, supported: str
) -> None:
    """A future jobset.x-k8s.io/v1beta7 or an old kubeflow.org/v1alpha2 TFJob is not
    read with today's schema (its numbers may mean something else), nor by the
    annotation fallback that reads any spec.template."""
    with pytest.raises(InvalidObject) as error:
        recognize_object(_versioned(obj, version), no_lookup, CONFIG)
    assert error.value.path == "apiVersion"
    assert version in error.value.message
    assert f"supported: {supported})" in error.value.message


@pytest.mark.parametrize(
    "obj",
    [
        jobset("js", replicated_job("w", 1, 4)),
        training_job("TFJob", "tf", {"Worker": (4, 1)}),
        job("j", parallelism=4),
        leader_worker_set("l", size=4),
        trainjob("tj", "torch", num_nodes=4),
    ],
    ids=lambda o: o["kind"],
)
def test_an_unknown_version_is_unreadable_to_the_webhook_too(obj: dict[str, Any]) -> None:
    """validate_object raises the same error, which the webhook answers per
    onUnreadable (allow with a warning, or reject)."""
    from gangkeeper.policies.admission.decision import validate_object
    from gangkeeper.policies.cluster.capacity import Capacity

    with pytest.raises(InvalidObject, match="not a version gangkeeper reads"):
        validate_object(
            _versioned(obj, "v9"), capacity=Capacity(CONFIG), lookup=no_lookup, config=CONFIG
        )
