"""Kubeflow Trainer TrainJob resolved with its runtime (recognizers/trainjob.py)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import (
    GPU,
    Lookup,
    container,
    gpu_spec,
    jobset,
    jobset_pod,
    no_lookup,
    pod_spec,
    replicated_job,
    template,
    training_runtime,
    trainjob,
)

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
TRAINER = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


def node_job(gpus: int | None = None, name: str = "node") -> dict[str, Any]:
    return replicated_job(
        name,
        None,
        None,
        None,
        pod_template=template(pod_spec(container("node", gpus))),
        job_labels=TRAINER,
    )


@pytest.mark.parametrize(
    ("runtime_nodes", "trainjob_nodes", "size"),
    [(1, 4, 4), (3, None, 3), (None, None, 1), (2, 8, 8)],
)
def test_num_nodes_of_the_trainjob_overrides_the_runtime(
    runtime_nodes: int | None, trainjob_nodes: int | None, size: int
) -> None:
    runtime = training_runtime("torch", node_job(2), num_nodes=runtime_nodes)
    obj = trainjob("tj", "torch", num_nodes=trainjob_nodes)
    gangs = recognize_object(obj, Lookup(runtime), CONFIG)
    if size < 2:
        assert gangs == []
        return
    [gang] = gangs
    assert (gang.name, gang.min_member) == ("tj", size)
    assert gang.total_demand() == {GPU: 2 * size}
    assert gang.source.kind == "TrainJob"


def test_resources_per_node_replace_the_runtime_node_resources() -> None:
    runtime = training_runtime("torch", node_job(1))
    obj = trainjob("tj", "torch", num_nodes=3, gpus_per_node=8)
    [gang] = recognize_object(obj, Lookup(runtime), CONFIG)
    assert [(r.name, r.count, dict(r.demand)) for r in gang.roles] == [("node", 3, {GPU: 8})]


def test_a_namespaced_training_runtime_is_looked_up_in_the_trainjob_namespace() -> None:
    runtime = training_runtime("mine", node_job(1), namespace="default")
    lookup = Lookup(runtime)
    obj = trainjob("tj", "mine", num_nodes=2, runtime_kind="TrainingRuntime")
    [gang] = recognize_object(obj, lookup, CONFIG)
    assert gang.min_member == 2
    assert ("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "default", "mine") in lookup.asked


def test_a_cluster_training_runtime_is_looked_up_without_namespace() -> None:
    lookup = Lookup(training_runtime("torch", node_job(1)))
    recognize_object(trainjob("tj", "torch", num_nodes=2), lookup, CONFIG)
    assert lookup.asked == [
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "", "torch")
    ]


def test_initializers_that_complete_before_training_are_not_members() -> None:
    runtime = training_runtime(
        "torch",
        replicated_job("dataset-initializer", 1, 1, None),
        replicated_job("model-initializer", 1, 1, None),
        replicated_job(
            "node",
            None,
            None,
            None,
            pod_template=template(pod_spec(container("node", 1))),
            job_labels=TRAINER,
            depends_on=[("dataset-initializer", "Complete"), ("model-initializer", "Complete")],
        ),
    )
    [gang] = recognize_object(trainjob("tj", "torch", num_nodes=4), Lookup(runtime), CONFIG)
    assert [r.name for r in gang.roles] == ["node"]
    assert gang.min_member == 4


def test_mpi_launcher_run_as_node_counts_as_one_of_the_nodes() -> None:
    runtime = training_runtime(
        "mpi",
        node_job(1),
        replicated_job("launcher", 1, 1, pod_template=template(gpu_spec(1)), job_labels=TRAINER),
        mpi_launcher_as_node=True,
    )
    [gang] = recognize_object(trainjob("tj", "mpi", num_nodes=4), Lookup(runtime), CONFIG)
    assert {r.name: r.count for r in gang.roles} == {"node": 3, "launcher": 1}
    assert gang.min_member == 4


def test_an_unknown_runtime_is_an_error_not_a_guess() -> None:
    with pytest.raises(InvalidObject) as error:
        recognize_object(trainjob("tj", "missing", num_nodes=4), no_lookup, CONFIG)
    assert error.value.path == "spec.runtimeRef"
    assert "missing" in error.value.message


def test_a_pod_of_a_trainjob_gets_the_trainjob_gang_through_its_owners() -> None:
    runtime = training_runtime("torch", node_job(2))
    parent = trainjob("tj", "torch", num_nodes=3)
    child_set = jobset("tj", replicated_job("node", 1, 3, 2), owner=parent)
    member, child_job = jobset_pod(child_set, "node", 0, 2)
    membership = recognize_pod(member, Lookup(runtime, parent, child_set, child_job), CONFIG)
    assert membership is not None
    assert membership.role == "node"
    assert membership.gang == recognize_object(parent, Lookup(runtime), CONFIG)[0]
    assert membership.gang.source.name == "tj"


def test_a_trainjob_pod_is_found_through_the_jobset_label_when_the_job_is_unknown() -> None:
    runtime = training_runtime("torch", node_job(2))
    parent = trainjob("tj", "torch", num_nodes=3)
    child_set = jobset("tj", replicated_job("node", 1, 3, 2), owner=parent)
    member, _job = jobset_pod(child_set, "node")
    membership = recognize_pod(member, Lookup(runtime, parent, child_set), CONFIG)
    assert membership is not None
    assert membership.gang.name == "tj"


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda t: t["spec"].pop("runtimeRef"), "spec.runtimeRef"),
        (lambda t: t["spec"]["runtimeRef"].pop("name"), "spec.runtimeRef.name"),
        (lambda t: t["spec"]["runtimeRef"].update(kind="Deployment"), "spec.runtimeRef"),
        (lambda t: t["spec"]["trainer"].update(numNodes=-1), "spec.trainer.numNodes"),
        (lambda t: t["spec"]["trainer"].update(numNodes="4"), "spec.trainer.numNodes"),
        (
            lambda t: t["spec"]["trainer"].update(resourcesPerNode={"limits": {GPU: "1.5"}}),
            'spec.trainer.resourcesPerNode.limits["nvidia.com/gpu"]',
        ),
        (
            lambda t: t["spec"]["trainer"].update(resourcesPerNode=[]),
            "spec.trainer.resourcesPerNode",
        ),
        (lambda t: t["spec"].update(trainer=7), "spec.trainer"),
    ],
)
def test_a_malformed_trainjob_is_an_error_naming_the_field(mutate: Any, path: str) -> None:
    runtime = training_runtime("torch", node_job(1))
    obj = trainjob("tj", "torch", num_nodes=2, gpus_per_node=1)
    mutate(obj)
    with pytest.raises(InvalidObject) as error:
        recognize_object(obj, Lookup(runtime), CONFIG)
    assert error.value.path == path


def test_a_malformed_runtime_is_an_error_naming_the_runtime_field() -> None:
    runtime = training_runtime("torch", node_job(1))
    runtime["spec"]["template"]["spec"]["replicatedJobs"] = "nope"
    with pytest.raises(InvalidObject) as error:
        recognize_object(trainjob("tj", "torch", num_nodes=2), Lookup(runtime), CONFIG)
    assert "replicatedJobs" in error.value.path
    assert "torch" in str(error.value)


TOLERATE_L4 = {"key": "pool", "operator": "Equal", "value": "l4", "effect": "NoSchedule"}


def _node_placement(obj: dict[str, Any], runtime: dict[str, Any]) -> Any:
    [gang] = recognize_object(obj, Lookup(runtime), CONFIG)
    return next(r for r in gang.roles if r.name == "node").placement


def test_pod_template_overrides_set_the_placement_of_their_target_jobs() -> None:
    runtime = training_runtime("torch", node_job(1))
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a", "pool": "x"}
    node["template"]["spec"]["template"]["spec"]["tolerations"] = [
        {"operator": "Exists", "key": "k"}
    ]
    obj = trainjob("tj", "torch", num_nodes=2)
    obj["spec"]["podTemplateOverrides"] = [
        {
            "targetJobs": [{"name": "node"}],
            "spec": {"nodeSelector": {"pool": "l4"}, "tolerations": [TOLERATE_L4]},
        }
    ]
    placement = _node_placement(obj, runtime)
    assert dict(placement.node_selector) == {"zone": "a", "pool": "l4"}
    # tolerations are only ever added: the pod tolerates at least what it really does
    assert {t.key for t in placement.tolerations} == {"k", "pool"}


def test_runtime_patches_set_the_placement_of_their_jobs() -> None:
    runtime = training_runtime("torch", node_job(1))
    obj = trainjob("tj", "torch", num_nodes=2)
    obj["spec"]["runtimePatches"] = [
        {
            "manager": "kueue.x-k8s.io/manager",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "spec": {
                                        "template": {
                                            "spec": {
                                                "nodeSelector": {"pool": "l4"},
                                                "tolerations": [TOLERATE_L4],
                                            }
                                        }
                                    }
                                },
                            }
                        ]
                    }
                }
            },
        }
    ]
    placement = _node_placement(obj, runtime)
    assert dict(placement.node_selector) == {"pool": "l4"}
    assert [t.key for t in placement.tolerations] == ["pool"]


def test_overrides_for_other_jobs_leave_the_node_job_alone() -> None:
    runtime = training_runtime("torch", node_job(1))
    obj = trainjob("tj", "torch", num_nodes=2)
    obj["spec"]["podTemplateOverrides"] = [
        {"targetJobs": [{"name": "launcher"}], "spec": {"nodeSelector": {"pool": "l4"}}}
    ]
    assert _node_placement(obj, runtime).node_selector == ()


@pytest.mark.parametrize(
    ("overrides", "path"),
    [
        ("x", "spec.podTemplateOverrides"),
        ([{"targetJobs": "node"}], "spec.podTemplateOverrides[0].targetJobs"),
        (
            [{"targetJobs": [{"name": "node"}], "spec": {"tolerations": {}}}],
            "spec.podTemplateOverrides[0].spec.tolerations",
        ),
        (
            [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"a": 1}}}],
            "spec.podTemplateOverrides[0].spec.nodeSelector.a",
        ),
    ],
)
def test_malformed_overrides_are_errors_naming_the_field(overrides: Any, path: str) -> None:
    runtime = training_runtime("torch", node_job(1))
    obj = trainjob("tj", "torch", num_nodes=2)
    obj["spec"]["podTemplateOverrides"] = overrides
    with pytest.raises(InvalidObject) as error:
        recognize_object(obj, Lookup(runtime), CONFIG)
    assert error.value.path == path


def test_a_pod_of_a_trainjob_whose_runtime_is_unknown_is_not_sized() -> None:
    parent = trainjob("tj", "torch", num_nodes=3)
    child_set = jobset("tj", replicated_job("node", 1, 3, 2), owner=parent)
    member, child_job = jobset_pod(child_set, "node")
    assert recognize_pod(member, Lookup(parent, child_set, child_job), CONFIG) is None


# --- resourcesPerNode, as Trainer applies it --------------------------------------
# Shapes: manifests/base/runtimes/torch_distributed.yaml and deepspeed_distributed.yaml
# of kubeflow/trainer v2.2.0. Rules: pkg/runtime/framework/plugins/jobset/builder.go
# (v2.2.0: the `node` container of ancestor-step trainer jobs, and of the `node` job
# with runLauncherAsNode; resources replaced) and pkg/runtime/core/trainingruntime.go
# + pkg/util/trainingruntime/trainingruntime.go MergeResourceRequirements (v2.3+,
# kubeflow/trainer#3602: merged per resource).

MERGE = Config(trainer_resources="merge")


def _node_container_runtime(gpus: int, *, extra: Any = None) -> dict[str, Any]:
    node = container("node", gpus)
    node["resources"]["requests"] = {"cpu": "4"}
    containers = [node] if extra is None else [extra, node]
    return training_runtime(
        "torch",
        replicated_job(
            "node", None, None, None, pod_template=template(pod_spec(*containers)),
            job_labels=TRAINER,
        ),
    )


def _cpu_memory_only(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["trainer"]["resourcesPerNode"] = {
        "limits": {"cpu": "8", "memory": "64Gi"},
        "requests": {"cpu": "8", "memory": "64Gi"},
    }
    return obj


def test_where_trainer_merges_resources_per_node_keeps_the_runtime_gpus() -> None:
    """A runtime node container of 8 GPUs, a TrainJob setting only cpu and memory:
    Trainer v2.3+ keeps the 8 GPUs (MergeResourceRequirements)."""
    obj = _cpu_memory_only(trainjob("tj", "torch", num_nodes=2))
    [gang] = recognize_object(obj, Lookup(_node_container_runtime(8)), MERGE)
    assert [(r.name, r.count, dict(r.demand)) for r in gang.roles] == [("node", 2, {GPU: 8})]


def test_trainer_v2_2_replaces_the_node_container_resources() -> None:
    """v2.2.0's builder calls WithResources: the runtime's GPUs are gone."""
    obj = _cpu_memory_only(trainjob("tj", "torch", num_nodes=2))
    [gang] = recognize_object(obj, Lookup(_node_container_runtime(8)), CONFIG)
    assert [(r.name, r.count, dict(r.demand)) for r in gang.roles] == [("node", 2, {})]


@pytest.mark.parametrize("config", [CONFIG, MERGE], ids=["replace", "merge"])
def test_a_gpu_given_in_resources_per_node_wins_under_either_rule(config: Config) -> None:
    obj = trainjob("tj", "torch", num_nodes=2, gpus_per_node=4)
    [gang] = recognize_object(obj, Lookup(_node_container_runtime(8)), config)
    assert [dict(r.demand) for r in gang.roles] == [{GPU: 4}]


@pytest.mark.parametrize("config", [CONFIG, MERGE], ids=["replace", "merge"])
def test_resources_per_node_goes_only_to_the_container_named_node(config: Config) -> None:
    """A sidecar listed first keeps its own resources; only `node` gets the TrainJob's."""
    sidecar = container("metrics", 1)
    obj = trainjob("tj", "torch", num_nodes=2, gpus_per_node=4)
    [gang] = recognize_object(obj, Lookup(_node_container_runtime(8, extra=sidecar)), config)
    assert [dict(r.demand) for r in gang.roles] == [{GPU: 5}]


def test_a_runtime_without_a_node_container_is_left_as_written() -> None:
    """Trainer looks for the container named `node` only; gangkeeper used to pick the
    first container instead."""
    runtime = training_runtime(
        "torch",
        replicated_job(
            "node", None, None, None, pod_template=template(pod_spec(container("trainer", 2))),
            job_labels=TRAINER,
        ),
    )
    obj = trainjob("tj", "torch", num_nodes=2, gpus_per_node=8)
    [gang] = recognize_object(obj, Lookup(runtime), CONFIG)
    assert [dict(r.demand) for r in gang.roles] == [{GPU: 2}]


def test_a_node_job_without_the_trainer_label_gets_no_resources_per_node() -> None:
    runtime = training_runtime(
        "custom",
        replicated_job(
            "node", None, None, None, pod_template=template(pod_spec(container("node", 1)))
        ),
    )
    [gang] = recognize_object(
        trainjob("tj", "custom", num_nodes=2, gpus_per_node=8), Lookup(runtime), CONFIG
    )
    assert [dict(r.demand) for r in gang.roles] == [{GPU: 1}]


@pytest.mark.parametrize("config", [CONFIG, MERGE], ids=["replace", "merge"])
def test_mpi_run_launcher_as_node_gives_resources_per_node_to_launcher_and_nodes(
    config: Config,
) -> None:
    """deepspeed_distributed.yaml: the launcher (ancestor-step trainer) and the `node`
    job both run a container named `node`; both get resourcesPerNode."""
    runtime = training_runtime(
        "deepspeed",
        replicated_job(
            "launcher", None, None, None, pod_template=template(pod_spec(container("node", 1))),
            job_labels=TRAINER,
        ),
        replicated_job(
            "node", None, None, None, pod_template=template(pod_spec(container("node", 1)))
        ),
        mpi_launcher_as_node=True,
    )
    obj = trainjob("tj", "deepspeed", num_nodes=3, gpus_per_node=8)
    [gang] = recognize_object(obj, Lookup(runtime), config)
    assert {r.name: dict(r.demand) for r in gang.roles} == {
        "launcher": {GPU: 8},
        "node": {GPU: 8},
    }


@pytest.mark.parametrize(
    ("policy", "keyed_by"),
    [
        (None, ""),
        ({}, ""),
        ({"coscheduling": {"scheduleTimeoutSeconds": 60}},
         "Kubeflow Trainer podGroupPolicy.coscheduling (label scheduling.x-k8s.io/pod-group)"
         " of ClusterTrainingRuntime/torch"),
        ({"volcano": {}},
         "Kubeflow Trainer podGroupPolicy.volcano (annotation scheduling.k8s.io/group-name)"
         " of ClusterTrainingRuntime/torch"),
    ],
)
def test_a_runtime_pod_group_policy_says_trainer_keys_the_gang_itself(
    policy: dict[str, Any] | None, keyed_by: str
) -> None:
    runtime = training_runtime("torch", node_job(1))
    if policy is not None:
        runtime["spec"]["podGroupPolicy"] = policy
    [gang] = recognize_object(trainjob("tj", "torch", num_nodes=2), Lookup(runtime), CONFIG)
    assert gang.keyed_by == keyed_by
    assert gang.min_member == 2  # still sized and checked for feasibility


def test_a_pod_group_policy_that_is_not_a_mapping_is_invalid_naming_the_field() -> None:
    runtime = training_runtime("torch", node_job(1))
    runtime["spec"]["podGroupPolicy"] = "coscheduling"
    with pytest.raises(InvalidObject, match=r"ClusterTrainingRuntime/torch\.spec\.podGroupPolicy"):
        recognize_object(trainjob("tj", "torch", num_nodes=2), Lookup(runtime), CONFIG)
