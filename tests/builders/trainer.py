"""TrainJobs and TrainingRuntimes for the real Kubeflow Trainer (v2.2.0) the sandbox runs.

A TrainJob selects the test's nodes and sets its pods' duration through
`runtimePatches` (Trainer's own API for changing the runtime's pod templates); a
TrainingRuntime is made from a ClusterTrainingRuntime the module ships, read back
from the cluster, so the tests change only what they say they change.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from builders.cluster import GPU, POOL_LABEL
from builders.controllers import JOBSET_NAME_LABEL, RUN_FOR

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
TRAINJOBS, RUNTIMES, CLUSTER_RUNTIMES = "trainjobs", "trainingruntimes", "clustertrainingruntimes"
RUN_SECONDS = "4s"


def needs_trainer(cluster: Any) -> None:
    if cluster.sandbox is not None and "trainer" not in cluster.sandbox.state().get(
        "components", []
    ):
        pytest.skip("the sandbox runs without Trainer's controller")


def trainjob(
    name: str,
    namespace: str,
    pool: str,
    *,
    runtime: str,
    nodes: int,
    gpus: int | None = None,
    resources: Mapping[str, Any] | None = None,
    jobs: tuple[str, ...] = ("node",),
    runtime_kind: str = "ClusterTrainingRuntime",
    run_for: str = RUN_SECONDS,
) -> dict[str, Any]:
    """A TrainJob on `runtime` with `nodes` nodes pinned to `pool`; `resourcesPerNode`
    is `gpus` GPUs (requests and limits) or `resources` as given."""
    pod_patch = {
        "metadata": {"annotations": {RUN_FOR: run_for}},
        "spec": {"nodeSelector": {POOL_LABEL: pool}},
    }
    trainer: dict[str, Any] = {"numNodes": nodes}
    if resources is not None:
        trainer["resourcesPerNode"] = dict(resources)
    elif gpus is not None:
        trainer["resourcesPerNode"] = {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": runtime_kind},
            "trainer": trainer,
            "runtimePatches": [
                {
                    "manager": "gangkeeper.io/e2e",
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                "replicatedJobs": [
                                    {"name": job, "template": {"spec": {"template": pod_patch}}}
                                    for job in jobs
                                ]
                            }
                        }
                    },
                }
            ],
        },
    }


def shipped_runtime(cluster: Any, name: str) -> dict[str, Any]:
    """A ClusterTrainingRuntime as the sandbox installed it from Trainer's module."""
    obj: dict[str, Any] = cluster.custom.get_cluster_custom_object(
        GROUP, VERSION, CLUSTER_RUNTIMES, name
    )
    return obj


def namespaced_runtime(cluster: Any, shipped: str, name: str, namespace: str) -> dict[str, Any]:
    """A TrainingRuntime `name` in `namespace` with the spec of the shipped
    ClusterTrainingRuntime `shipped` (to be changed by the caller, then created)."""
    spec = copy.deepcopy(shipped_runtime(cluster, shipped)["spec"])
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def replicated_job_of(runtime: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The runtime's replicatedJob `name` (the dict inside `runtime`, to change)."""
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        if job["name"] == name:
            return job  # type: ignore[no-any-return]
    raise AssertionError(f"runtime {runtime['metadata']['name']} has no replicatedJob {name}")


def pod_spec_of(runtime: Mapping[str, Any], job: str) -> dict[str, Any]:
    return replicated_job_of(runtime, job)["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def create_runtime(cluster: Any, runtime: Mapping[str, Any]) -> None:
    namespace = runtime["metadata"]["namespace"]
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, RUNTIMES, runtime)


def create_trainjob(cluster: Any, body: Mapping[str, Any]) -> None:
    namespace = body["metadata"]["namespace"]
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, TRAINJOBS, body)


def read_trainjob(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, TRAINJOBS, name
    )
    return obj


def selector(name: str) -> str:
    """The label selector of a TrainJob's pods (Trainer names the JobSet after it)."""
    return f"{JOBSET_NAME_LABEL}={name}"
