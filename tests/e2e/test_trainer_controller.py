"""TrainJobs run by Kubeflow Trainer's real controller manager (v2.2.0, with its own
webhooks) on the ClusterTrainingRuntimes its module ships, through the real JobSet
and Job controllers, on kwok nodes.

The chain users run: TrainJob → (Trainer) JobSet → (JobSet) Jobs → (Job controller)
pods. gangkeeper must key and gate every pod at creation, release the TrainJob's
gang whole, and the TrainJob must complete; `kubectl apply --dry-run=server` of a
TrainJob that can never fit is refused with the numbers, before anything exists.

Each TrainJob selects the test's nodes and sets the pods' duration through
`runtimePatches` (Trainer's own API for changing the runtime's pod templates).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from builders.cluster import GPU, POOL_LABEL, unique
from builders.controllers import JOBSET_NAME_LABEL, RUN_FOR, condition, is_ready, recording

GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "trainjobs"
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
    gpus: int,
    jobs: tuple[str, ...] = ("node",),
) -> dict[str, Any]:
    """A TrainJob on `runtime` with `nodes` nodes of `gpus` GPUs, pinned to `pool`."""
    pod_patch = {
        "metadata": {"annotations": {RUN_FOR: RUN_SECONDS}},
        "spec": {"nodeSelector": {POOL_LABEL: pool}},
    }
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {
                "numNodes": nodes,
                "resourcesPerNode": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}},
            },
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


def read(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return obj


def pods(cluster: Any, namespace: str, name: str) -> list[Any]:
    # Trainer names the JobSet after the TrainJob.
    selector = f"{JOBSET_NAME_LABEL}={name}"
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def runs_whole_and_completes(
    cluster: Any, namespace: str, body: dict[str, Any], members: int
) -> list[Any]:
    name = body["metadata"]["name"]
    with recording(cluster, namespace, f"{JOBSET_NAME_LABEL}={name}") as seen:
        cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        cluster.wait_for(
            lambda: sum(is_ready(p) for p in pods(cluster, namespace, name)) == members,
            timeout=120,
            message=f"the {members} pods of TrainJob {name} Running and Ready",
        )
        gated = seen.gated_at_creation()
    assert len(gated) == members and all(gated.values()), gated
    found = pods(cluster, namespace, name)
    assert {p.metadata.labels.get("gangkeeper.io/gang") for p in found} == {name}, (
        "one gang per TrainJob"
    )
    assert {p.metadata.annotations["gangkeeper.io/min-member"] for p in found} == {str(members)}
    cluster.wait_for(
        lambda: condition(read(cluster, namespace, name), "Complete"),
        timeout=120,
        message=f"TrainJob {name} Complete",
    )
    assert not condition(read(cluster, namespace, name), "Failed")
    return found


def test_a_torch_trainjob_is_gated_at_creation_released_whole_runs_and_completes(
    cluster: Any, gang_namespace: str
) -> None:
    needs_trainer(cluster)
    pool = unique("trainer-torch")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    body = trainjob(unique("torch"), gang_namespace, pool, runtime="torch-distributed",
                    nodes=4, gpus=2)
    found = runs_whole_and_completes(cluster, gang_namespace, body, members=4)
    assert {p.spec.containers[0].resources.limits[GPU] for p in found} == {"2"}


@pytest.mark.parametrize("runtime", ["deepspeed-distributed", "mlx-distributed"])
def test_an_mpi_trainjob_with_its_launcher_as_a_gpu_rank_runs_whole(
    cluster: Any, gang_namespace: str, runtime: str
) -> None:
    """The MPI runtimes (`runLauncherAsNode`): the launcher is rank 0 and takes a node's
    GPUs, so `numNodes` 3 is a launcher and 2 node pods, one gang."""
    needs_trainer(cluster)
    pool = unique("trainer-mpi")
    cluster.create_gpu_nodes(pool, 3, 1, labels={POOL_LABEL: pool})
    body = trainjob(unique(runtime.partition("-")[0]), gang_namespace, pool, runtime=runtime,
                    nodes=3, gpus=1, jobs=("launcher", "node"))
    found = runs_whole_and_completes(cluster, gang_namespace, body, members=3)
    roles = sorted(p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] for p in found)
    assert roles == ["launcher", "node", "node"]


def test_a_trainjob_that_can_never_fit_is_refused_by_server_dry_run_and_one_that_fits_is_not(
    cluster: Any, gang_namespace: str, tmp_path: Path
) -> None:
    needs_trainer(cluster)
    pool = unique("trainer-never")
    cluster.create_gpu_nodes(pool, 4, 8, labels={POOL_LABEL: pool})
    path = tmp_path / "trainjob.json"

    too_big = trainjob(unique("big"), gang_namespace, pool, runtime="torch-distributed",
                       nodes=5, gpus=8)
    path.write_text(json.dumps(too_big))
    done = cluster.kubectl("apply", "--dry-run=server", "-f", str(path), check=False)
    assert done.returncode != 0, f"dry run admitted a TrainJob that cannot fit:\n{done.stdout}"
    assert "denied the request" in done.stderr, done.stderr
    assert re.search(r"\b40\b", done.stderr) and re.search(r"\b32\b", done.stderr), done.stderr

    fits = trainjob(unique("fits"), gang_namespace, pool, runtime="torch-distributed",
                    nodes=4, gpus=8)
    path.write_text(json.dumps(fits))
    done = cluster.kubectl("apply", "--dry-run=server", "-f", str(path), check=False)
    assert done.returncode == 0, done.stderr
    # Trainer's own validating webhook answers too: a runtime that does not exist.
    missing = trainjob(unique("nort"), gang_namespace, pool, runtime="no-such-runtime",
                       nodes=1, gpus=1)
    path.write_text(json.dumps(missing))
    done = cluster.kubectl("apply", "--dry-run=server", "-f", str(path), check=False)
    assert done.returncode != 0 and "trainer.kubeflow.org" in done.stderr, done.stderr
    got = cluster.kubectl("get", "trainjobs.trainer.kubeflow.org", "-n", gang_namespace,
                          "-o", "name")
    assert got.stdout.strip() == "", "a dry run created a TrainJob"
