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
import time
from pathlib import Path
from typing import Any

import pytest
from builders.cluster import GPU, POOL_LABEL, unique
from builders.controllers import (
    condition,
    is_ready,
    pods_of,
    recording,
    run_blocker,
    wait_for_pods,
)
from builders.rebind import HOLD, hold_and_take_a_pinned_node, recreated_and_gated, whole_again
from builders.trainer import (
    create_runtime,
    create_trainjob,
    namespaced_runtime,
    needs_trainer,
    read_trainjob,
    replicated_job_of,
    selector,
    trainjob,
)

from gangkeeper.policies.names import REQUEUE_LABEL, REQUEUES_ANNOTATION

REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
TRAINER_VALIDATOR = "validator.trainjob.trainer.kubeflow.org"
#: Long enough for kube-scheduler to have bound any pod it could.
SETTLE_SECONDS = 3.0
#: How long each pod of a TrainJob whose launcher waits for the nodes' Ready runs.
DEPENDS_ON_RUN_SECONDS = "30s"


def runs_whole_and_completes(
    cluster: Any, namespace: str, body: dict[str, Any], members: int
) -> list[Any]:
    name = body["metadata"]["name"]
    with recording(cluster, namespace, selector(name)) as seen:
        create_trainjob(cluster, body)
        found = wait_for_pods(cluster, namespace, selector(name), members, where=is_ready,
                              timeout=120, what="Running and Ready")
        gated = seen.gated_at_creation()
    assert len(gated) == members and all(gated.values()), gated
    assert {p.metadata.labels.get("gangkeeper.io/gang") for p in found} == {name}, (
        "one gang per TrainJob"
    )
    assert {p.metadata.annotations["gangkeeper.io/min-member"] for p in found} == {str(members)}
    cluster.wait_for(
        lambda: condition(read_trainjob(cluster, namespace, name), "Complete"),
        timeout=120,
        message=f"TrainJob {name} Complete",
    )
    assert not condition(read_trainjob(cluster, namespace, name), "Failed")
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


def test_a_deepspeed_launcher_that_depends_on_the_nodes_ready_neither_deadlocks_nor_splits(
    cluster: Any, gang_namespace: str, plain_namespace: str
) -> None:
    """deepspeed-distributed with the launcher started only once the `node` pods are
    Ready (`dependsOn`, as Trainer's later runtimes ship it; v2.2.0's has none, so the
    test adds it to a copy, with `node` first as JobSet requires). The launcher is a
    GPU rank that does not exist when the gang is released: gangkeeper must release
    the two node pods without waiting for it (else a deadlock), and only when there is
    room for it too (else the node pods hold 2 GPUs for a launcher that cannot run).
    """
    needs_trainer(cluster)
    pool = unique("trainer-dep")
    cluster.create_gpu_nodes(pool, 3, 1, labels={POOL_LABEL: pool})
    blocker = run_blocker(cluster, plain_namespace, pool, 1)  # 2 of 3 GPUs free
    runtime = namespaced_runtime(cluster, "deepspeed-distributed", unique("ds-dep"),
                                 gang_namespace)
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    launcher = replicated_job_of(runtime, "launcher")
    launcher["dependsOn"] = [{"name": "node", "status": "Ready"}]
    jobs.sort(key=lambda job: job["name"] != "node")
    create_runtime(cluster, runtime)
    name = unique("ds")
    # The launcher is made only once the node pods are Ready (JobSet, then Job
    # controller, admission, release, scheduler, kwok), and the test then wants all 3
    # Ready at once: the node pods run long enough to still be Ready by then.
    body = trainjob(name, gang_namespace, pool, runtime=runtime["metadata"]["name"],
                    runtime_kind="TrainingRuntime", nodes=3, gpus=1, jobs=("launcher", "node"),
                    run_for=DEPENDS_ON_RUN_SECONDS)

    with recording(cluster, gang_namespace, selector(name)) as seen:
        create_trainjob(cluster, body)
        nodes = wait_for_pods(cluster, gang_namespace, selector(name), 2,
                              what="(the node pods) created")
        time.sleep(SETTLE_SECONDS)
        nodes = pods_of(cluster, gang_namespace, selector(name))
        assert [p.metadata.name for p in nodes if p.spec.node_name] == [], (
            "2 GPUs free for a gang of 3: the node pods may not bind without the launcher's room"
        )
        assert {p.metadata.labels[REPLICATED_JOB] for p in nodes} == {"node"}
        cluster.core.delete_namespaced_pod(blocker, plain_namespace, grace_period_seconds=0)
        found = wait_for_pods(cluster, gang_namespace, selector(name), 3, where=is_ready,
                              timeout=120, what="Running and Ready (launcher after the nodes)")
        gated = seen.gated_at_creation()
    assert len(gated) == 3 and all(gated.values()), gated
    roles = {p.metadata.name: p.metadata.labels[REPLICATED_JOB] for p in found}
    assert sorted(roles.values()) == ["launcher", "node", "node"]
    created = {roles[p.metadata.name]: p.metadata.creation_timestamp for p in found}
    assert created["launcher"] >= max(
        p.metadata.creation_timestamp for p in found if roles[p.metadata.name] == "node"
    ), "the launcher existed before its dependsOn was met"
    assert {p.metadata.annotations["gangkeeper.io/min-member"] for p in found} == {"3"}
    cluster.wait_for(
        lambda: condition(read_trainjob(cluster, gang_namespace, name), "Complete"),
        timeout=120,
        message=f"TrainJob {name} Complete",
    )


def test_a_trainjob_that_can_never_fit_is_refused_by_server_dry_run_and_one_that_fits_is_not(
    cluster: Any, gang_namespace: str, tmp_path: Path
) -> None:
    needs_trainer(cluster)
    registered = {
        hook.name
        for config in cluster.admission.list_validating_webhook_configuration().items
        for hook in config.webhooks or []
    }
    assert TRAINER_VALIDATOR in registered, "Trainer's TrainJob webhook is not in the chain"
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
    assert done.returncode != 0 and f'"{TRAINER_VALIDATOR}" denied' in done.stderr, done.stderr
    got = cluster.kubectl("get", "trainjobs.trainer.kubeflow.org", "-n", gang_namespace,
                          "-o", "name")
    assert got.stdout.strip() == "", "a dry run created a TrainJob"


def test_a_trainjob_whose_pinned_node_was_taken_is_suspended_and_resumed_and_runs_whole(
    cluster: Any, gang_namespace: str, plain_namespace: str
) -> None:
    """A TrainJob of 2 nodes x 8 GPUs on two 8-GPU nodes, its pods also held by another
    system's gate: gangkeeper lifts its own gate and pins both; a pod of no gang takes
    one pinned node; the holds go. The watchdog suspends the TrainJob (Trainer then
    re-applies its JobSet suspended, the JobSet suspends its Job, the Job controller
    deletes the pods without counting failures, with `backoffLimit: 0`), resumes it
    once the pods are gone, and the new pods wait gated, holding no GPU, until the gang
    fits; then it binds whole and completes."""
    needs_trainer(cluster)
    pool = unique("trainer-rebind")
    nodes = cluster.create_gpu_nodes(pool, 2, 8, labels={POOL_LABEL: pool})
    name = unique("rebind")
    # Trainer's shipped runtimes leave backoffLimit at the Job's default (6); a runtime
    # that allows no failed pod is where deleting the stuck member used to fail the
    # TrainJob (before: `Failed`, "BackoffLimitExceeded").
    runtime = namespaced_runtime(cluster, "torch-distributed", unique("torch-strict"),
                                 gang_namespace)
    replicated_job_of(runtime, "node")["template"]["spec"]["backoffLimit"] = 0
    create_runtime(cluster, runtime)
    body = trainjob(name, gang_namespace, pool, runtime=runtime["metadata"]["name"], nodes=2,
                    gpus=8, run_for="20s", runtime_kind="TrainingRuntime")
    patched = body["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    patched["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["schedulingGates"] = [
        {"name": HOLD}
    ]
    create_trainjob(cluster, body)
    pinned, _ = hold_and_take_a_pinned_node(cluster, gang_namespace, plain_namespace, pool, 2)
    first = {p.metadata.uid for p in pinned}

    def not_failed() -> None:
        assert not condition(read_trainjob(cluster, gang_namespace, name), "Failed")

    cluster.wait_for(lambda: recreated_and_gated(cluster, gang_namespace, first, 2, not_failed),
                     timeout=120, message="both members recreated and gated")
    found = read_trainjob(cluster, gang_namespace, name)
    assert not found["spec"].get("suspend"), "resumed once its pods were gone"
    assert found["metadata"]["annotations"].get(REQUEUES_ANNOTATION) == "1"
    assert REQUEUE_LABEL not in (found["metadata"].get("labels") or {})
    cluster.core.delete_namespaced_pod("thief", plain_namespace, grace_period_seconds=0)
    pods = cluster.wait_for(lambda: whole_again(cluster, gang_namespace, 2), timeout=90,
                            message="the gang bound whole once it fits")
    assert sorted(p.spec.node_name for p in pods) == sorted(nodes)
    cluster.wait_for(
        lambda: condition(read_trainjob(cluster, gang_namespace, name), "Complete"),
        timeout=120,
        message=f"TrainJob {name} Complete",
    )
    (job,) = cluster.batch.list_namespaced_job(gang_namespace).items
    assert not job.status.failed, job.status  # no pod counted against backoffLimit
    events = [e for e in cluster.core.list_namespaced_event(gang_namespace).items
              if e.reason == "GangRequeued"]
    assert events and f"TrainJob {name} suspended" in events[0].message, events
