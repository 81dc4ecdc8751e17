"""decide_pod / validate_object: recognise, check and plan, as the webhook and check call them."""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies import (
    Capacity,
    Config,
    InvalidObject,
    KubeObject,
    decide_pod,
    validate_object,
)

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {GPU: str(gpus)}}}


def job(name: str = "train", parallelism: int = 4, gpus: int | str = 1) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "i", "resources": {"limits": {GPU: str(gpus)}}}
                    ],
                }
            },
        },
    }


def pod_of(owner: dict[str, Any], *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{owner['metadata']['name']}-0",
            "namespace": "team",
            "labels": {"app": "train", **(labels or {})},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": owner["spec"]["template"]["spec"],
    }


class Lookup:
    """An owner lookup over a fixed set of objects, recording what it was asked."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {
            (o["apiVersion"], o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o
            for o in objects
        }

    def __call__(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return self.objects.get((api_version, kind, namespace, name))


def decide(
    pod: dict[str, Any], lookup: Lookup, gpus: tuple[int, ...] = (4, 4), **config: Any
) -> Any:
    capacity = Capacity.from_nodes([node(f"n{i}", g) for i, g in enumerate(gpus)])
    return decide_pod(
        pod, namespace="team", capacity=capacity, lookup=lookup, config=Config(**config)
    )


def test_a_gang_pod_that_fits_is_patched_with_its_gang_keys() -> None:
    owner = job()
    decision = decide(pod_of(owner), Lookup(owner))
    assert decision.membership is not None
    assert decision.membership.gang.name == "train"
    assert decision.membership.gang.min_member == 4
    assert decision.verdict.allowed
    assert decision.skipped == ""
    assert decision.patched["metadata"]["labels"]["gangkeeper.io/gang"] == "train"
    assert {"name": "gangkeeper.io/gang"} in decision.patched["spec"]["schedulingGates"]


def test_a_gang_that_could_never_run_is_rejected_and_not_patched() -> None:
    owner = job(parallelism=3, gpus=2)
    decision = decide(pod_of(owner), Lookup(owner), gpus=(3, 3))
    assert not decision.verdict.allowed
    assert decision.verdict.code == "packing"
    assert "gang team/train" in decision.verdict.reason
    assert decision.patched is None


def test_a_pod_outside_any_gang_is_allowed_untouched() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    decision = decide(pod, Lookup())
    assert decision.membership is None
    assert decision.verdict.allowed
    assert decision.patched is None
    assert decision.skipped == "not part of a gang"


def test_the_skip_label_opts_a_pod_out() -> None:
    owner = job()
    decision = decide(pod_of(owner, labels={"gangkeeper.io/skip": "true"}), Lookup(owner))
    assert decision.membership is None
    assert decision.patched is None
    assert "gangkeeper.io/skip" in decision.skipped


def test_kube_system_is_never_gang_keyed() -> None:
    owner = job()
    capacity = Capacity.from_nodes([node("n", 8)])
    decision = decide_pod(
        pod_of(owner),
        namespace="kube-system",
        capacity=capacity,
        lookup=Lookup(owner),
        config=Config(),
    )
    assert decision.patched is None
    assert "kube-system" in decision.skipped


def test_the_namespace_of_the_request_fills_a_pod_without_one() -> None:
    owner = job()
    pod = pod_of(owner)
    del pod["metadata"]["namespace"]
    decision = decide(pod, Lookup(owner))
    assert decision.membership is not None
    assert decision.membership.gang.namespace == "team"
    assert decision.patched["metadata"]["namespace"] == "team"


def test_deciding_on_the_patched_pod_changes_nothing_more() -> None:
    owner = job()
    first = decide(pod_of(owner), Lookup(owner))
    again = decide(first.patched, Lookup(owner))
    assert again.verdict.allowed
    assert again.patched is None
    assert again.skipped


@pytest.mark.parametrize(("policy", "allowed"), [("skip", True), ("reject", False)])
def test_another_gang_systems_pod_is_skipped_or_rejected_per_config(
    policy: str, allowed: bool
) -> None:
    owner = job()
    pod = pod_of(owner, labels={"kueue.x-k8s.io/pod-group-name": "theirs"})
    decision = decide(pod, Lookup(owner), on_conflict=policy)
    assert decision.verdict.allowed is allowed
    assert decision.patched is None
    text = decision.skipped if allowed else decision.verdict.reason
    assert "kueue.x-k8s.io/pod-group-name=theirs" in text
    if not allowed:
        assert decision.verdict.code == "conflict"


def test_an_unreadable_gang_pod_raises_invalid_object_naming_the_field() -> None:
    owner = job(gpus="1.5")
    with pytest.raises(InvalidObject, match=r"nvidia\.com/gpu"):
        decide(pod_of(owner), Lookup(owner))


def test_a_fitting_gang_that_must_wait_carries_the_warning() -> None:
    owner = job(parallelism=2, gpus=4)
    capacity = Capacity.from_nodes([node("a", 4), node("b", 4)])
    capacity.add_pod("busy", "a", {GPU: 1})
    decision = decide_pod(
        pod_of(owner), namespace="team", capacity=capacity, lookup=Lookup(owner), config=Config()
    )
    assert decision.verdict.allowed
    assert decision.patched is not None
    assert decision.verdict.warnings


def validate(obj: dict[str, Any], *gpus: int) -> list[Any]:
    capacity = Capacity.from_nodes([node(f"n{i}", g) for i, g in enumerate(gpus)])
    return validate_object(obj, capacity=capacity, lookup=Lookup(), config=Config())


def test_validating_a_workload_gives_one_decision_per_gang() -> None:
    [decision] = validate(job(parallelism=8, gpus=1), 4, 1)
    assert decision.gang.name == "train"
    assert not decision.verdict.allowed
    assert decision.verdict.reason == (
        "gang team/train needs 8 \u00d7 1 nvidia.com/gpu = 8; "
        "the nodes it may use hold at most 5 (2 nodes: 4+1)"
    )


def test_validating_something_that_is_not_a_gang_gives_nothing() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert validate(config_map, 8) == []
    assert validate(job(parallelism=1), 8) == []


def test_validating_a_leader_worker_set_answers_each_group() -> None:
    template = {"spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: "8"}}}]}}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": "team"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": template}},
    }
    decisions = validate(lws, 8, 8)
    assert len(decisions) == 2
    assert all(d.verdict.allowed for d in decisions)
    assert [d.verdict.allowed for d in validate(lws, 8)] == [False, False]


@pytest.mark.parametrize(("policy", "allowed"), [("skip", True), ("reject", False)])
def test_validation_of_a_kueue_pod_group_pod_follows_on_conflict(
    policy: str, allowed: bool
) -> None:
    """Kueue's plain pod group (kueue v0.17.0 site/static/examples/pods-kueue/
    kueue-pod-group.yaml): under onConflict: reject the mutating webhook refuses the
    pod, and the validating answer (dry-run, `check`) says the same; under skip it is
    left to Kueue and only refused when it could never run."""
    member = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "sample-leader-x",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/pod-group-name": "sample-group"},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"},
        },
        "spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: "1"}}}]},
    }
    config = Config(on_conflict=policy)  # type: ignore[arg-type]
    capacity = Capacity.from_nodes([node("a", 8)], config)
    [decision] = validate_object(member, capacity=capacity, lookup=Lookup(), config=config)
    assert decision.verdict.allowed is allowed
    if not allowed:
        assert decision.verdict.code == "conflict"
        assert "kueue.x-k8s.io/pod-group-name=sample-group" in decision.verdict.reason


@pytest.mark.parametrize(("policy", "allowed"), [("skip", True), ("reject", False)])
def test_a_trainjob_whose_runtime_gangs_it_itself_is_refused_only_under_reject(
    policy: str, allowed: bool
) -> None:
    """A runtime with podGroupPolicy.coscheduling: Trainer keys every pod, which
    onConflict: reject refuses, so the TrainJob itself is refused at apply time."""
    node_job = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "i"}]}}},
        },
    }
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-cosched"},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 60}},
            "template": {"spec": {"replicatedJobs": [node_job]}},
        },
    }
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "team"},
        "spec": {
            "runtimeRef": {"name": "torch-cosched"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {GPU: "1"}}},
        },
    }

    def lookup(api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return runtime if (kind, name) == ("ClusterTrainingRuntime", "torch-cosched") else None

    config = Config(on_conflict=policy)  # type: ignore[arg-type]
    capacity = Capacity.from_nodes([node("a", 8)], config)
    [decision] = validate_object(trainjob, capacity=capacity, lookup=lookup, config=config)
    assert decision.verdict.allowed is allowed
    if not allowed:
        assert decision.verdict.code == "conflict"
        assert "podGroupPolicy.coscheduling (label scheduling.x-k8s.io/pod-group)" in (
            decision.verdict.reason
        )
        assert "ClusterTrainingRuntime/torch-cosched" in decision.verdict.reason
    never = Capacity.from_nodes([node("a", 1)], config)
    [decision] = validate_object(trainjob, capacity=never, lookup=lookup, config=config)
    assert not decision.verdict.allowed, "one that could never run is refused either way"
    assert decision.verdict.code != "conflict"
