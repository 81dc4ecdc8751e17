"""JobSets run by the real JobSet controller (v0.11.1, with its own webhooks) and the
real Job controller, on kwok nodes whose pods start, become Ready and finish.

The pods are the ones those controllers create, not pods shaped after them: gangkeeper
must key and gate each at creation, release the gang whole once it exists and fits,
and the JobSet must complete. The Trainer-shaped JobSets follow Kubeflow Trainer's
runtimes at HEAD (`manifests/base/runtimes/deepspeed_distributed.yaml` and
`mlx_distributed.yaml`: replicated job `node`, then `launcher` with
`dependsOn: [{name: node, status: Ready}]` and `runLauncherAsNode`, so the launcher
is a GPU rank created only once the node pods are Ready). v2.2.0's runtimes, which
the sandbox's real Trainer installs (`test_trainer_controller.py`), have no
`dependsOn` yet.
"""

from __future__ import annotations

import time
from typing import Any

from builders.cluster import POOL_LABEL, unique
from builders.controllers import (
    JOBSET_NAME_LABEL,
    condition,
    gpu_template,
    is_gated,
    is_ready,
    jobset,
    recording,
    replicated_job,
    run_blocker,
)

GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
RUN_SECONDS = "4s"
#: Exclusive placement: each Job's followers are made only once its leader has a node
#: (the Job controller retries the refused creates), so the leaders run long enough to
#: still be Ready when the followers are.
EXCLUSIVE_RUN_SECONDS = "30s"
RACK = "e2e.gangkeeper.io/rack"
#: Long enough for kube-scheduler to have bound any pod it could.
SETTLE_SECONDS = 3.0


def create(cluster: Any, namespace: str, body: dict[str, Any]) -> None:
    cluster.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)


def read(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = cluster.custom.get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return obj


def pods(cluster: Any, namespace: str, name: str) -> list[Any]:
    selector = f"{JOBSET_NAME_LABEL}={name}"
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def wait_completed(cluster: Any, namespace: str, name: str, timeout: float = 120) -> None:
    cluster.wait_for(
        lambda: condition(read(cluster, namespace, name), "Completed"),
        timeout=timeout,
        message=f"JobSet {name} Completed",
    )
    assert not condition(read(cluster, namespace, name), "Failed")


def test_a_jobset_of_two_gpu_roles_is_gated_at_creation_released_whole_runs_and_completes(
    cluster: Any, gang_namespace: str
) -> None:
    pool = unique("jobset-roles")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    name = unique("two-roles")
    body = jobset(
        name,
        gang_namespace,
        [
            replicated_job("driver", gpu_template(pool, 2, run_for=RUN_SECONDS)),
            replicated_job(
                "workers", gpu_template(pool, 1, run_for=RUN_SECONDS), replicas=2, parallelism=2
            ),
        ],
    )
    with recording(cluster, gang_namespace, f"{JOBSET_NAME_LABEL}={name}") as seen:
        create(cluster, gang_namespace, body)
        cluster.wait_for(
            lambda: sum(is_ready(p) for p in pods(cluster, gang_namespace, name)) == 5,
            timeout=90,
            message="the driver and 4 workers Running and Ready",
        )
        gated = seen.gated_at_creation()
    assert len(gated) == 5 and all(gated.values()), gated
    members = pods(cluster, gang_namespace, name)
    gangs = {p.metadata.labels.get("gangkeeper.io/gang") for p in members}
    assert gangs == {name}, f"one gang per JobSet, got {gangs}"
    assert {p.metadata.annotations["gangkeeper.io/min-member"] for p in members} == {"5"}
    wait_completed(cluster, gang_namespace, name)


def test_a_jobset_with_exclusive_placement_starts(cluster: Any, gang_namespace: str) -> None:
    """JobSet's pod webhook refuses follower pods until the index-0 leader of each Job
    has a node (`pkg/webhooks/pod_admission_webhook.go`); the gang must still start."""
    pool = unique("exclusive")
    for rack in ("a", "b"):
        cluster.create_gpu_nodes(f"{pool}-{rack}", 1, 4, labels={POOL_LABEL: pool, RACK: rack})
    name = unique("exclusive")
    body = jobset(
        name,
        gang_namespace,
        [
            replicated_job(
                "workers", gpu_template(pool, 1, run_for=EXCLUSIVE_RUN_SECONDS), replicas=2,
                parallelism=2,
            )
        ],
        annotations={"alpha.jobset.sigs.k8s.io/exclusive-topology": RACK},
    )
    create(cluster, gang_namespace, body)
    cluster.wait_for(
        lambda: sum(is_ready(p) for p in pods(cluster, gang_namespace, name)) == 4,
        timeout=120,
        message="all 4 pods of the exclusive-placement JobSet running",
    )
    by_job: dict[str, set[str]] = {}
    for p in pods(cluster, gang_namespace, name):
        by_job.setdefault(p.metadata.labels["job-name"], set()).add(p.spec.node_name)
    assert all(len(nodes) == 1 for nodes in by_job.values()), by_job
    assert len({n for nodes in by_job.values() for n in nodes}) == 2, (
        f"each Job on a rack of its own: {by_job}"
    )
    wait_completed(cluster, gang_namespace, name)


def _trainer_shaped(
    name: str, namespace: str, pool: str, *, nodes: int, gpus: int
) -> dict[str, Any]:
    """A JobSet as Trainer renders the DeepSpeed/MLX runtimes with runLauncherAsNode:
    `nodes - 1` node pods, then the launcher (rank 0, a GPU rank too) once they are Ready."""
    launcher = gpu_template(pool, gpus, run_for=RUN_SECONDS, container="node")
    launcher["metadata"]["labels"] = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    return jobset(
        name,
        namespace,
        [
            replicated_job(
                "node",
                gpu_template(pool, gpus, run_for="600s", container="node"),
                parallelism=nodes - 1,
            ),
            replicated_job(
                "launcher", launcher, depends_on=[{"name": "node", "status": "Ready"}]
            ),
        ],
    )


def test_a_trainer_shaped_launcher_that_waits_for_ready_nodes_runs_with_its_room_held(
    cluster: Any, gang_namespace: str
) -> None:
    pool = unique("launcher")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    name = unique("deepspeed")
    create(cluster, gang_namespace, _trainer_shaped(name, gang_namespace, pool, nodes=4, gpus=2))
    # Node pods first, released with the launcher's 2 GPUs held; once they are Ready
    # the JobSet controller creates the launcher, which is released onto that room.
    cluster.wait_for(
        lambda: sum(is_ready(p) for p in pods(cluster, gang_namespace, name)) == 4,
        timeout=120,
        message="3 node pods and the launcher Running and Ready",
    )
    launcher = [p for p in pods(cluster, gang_namespace, name) if "launcher" in p.metadata.name]
    assert len(launcher) == 1 and launcher[0].spec.node_name


def test_a_trainer_shaped_jobset_whose_launcher_would_not_fit_releases_nothing(
    cluster: Any, gang_namespace: str, plain_namespace: str
) -> None:
    pool = unique("no-room")
    # 8 GPUs, 2 taken by a pod gangkeeper does not manage: the 3 node pods x 2 GPUs
    # fit the 6 free, the launcher's 2 more do not (the gang fits the fleet, not now).
    cluster.create_gpu_nodes(pool, 4, 2, labels={POOL_LABEL: pool})
    blocker = run_blocker(cluster, plain_namespace, pool, 2)
    name = unique("deepspeed-big")
    create(cluster, gang_namespace, _trainer_shaped(name, gang_namespace, pool, nodes=4, gpus=2))
    cluster.wait_for(
        lambda: len(pods(cluster, gang_namespace, name)) == 3,
        timeout=60,
        message="the 3 node pods created",
    )
    time.sleep(SETTLE_SECONDS)
    members = pods(cluster, gang_namespace, name)
    assert all(is_gated(p) for p in members), "released although the launcher has no room"
    assert not [p for p in members if p.spec.node_name]

    cluster.core.delete_namespaced_pod(blocker, plain_namespace)
    cluster.wait_for(
        lambda: sum(is_ready(p) for p in pods(cluster, gang_namespace, name)) == 4,
        timeout=120,
        message="node pods and launcher running once the room is free",
    )


def test_an_initializer_that_completes_runs_before_the_trainer_gang_starts(
    cluster: Any, gang_namespace: str
) -> None:
    pool = unique("initializer")
    cluster.create_gpu_nodes(pool, 1, 4, labels={POOL_LABEL: pool})
    name = unique("with-init")
    init = gpu_template(pool, 0, run_for="1s", container="dataset-initializer")
    init["spec"]["containers"][0]["resources"] = {}
    body = jobset(
        name,
        gang_namespace,
        [
            replicated_job("dataset-initializer", init),
            replicated_job(
                "node",
                gpu_template(pool, 1, run_for=RUN_SECONDS, container="node"),
                parallelism=4,
                depends_on=[{"name": "dataset-initializer", "status": "Complete"}],
            ),
        ],
    )
    create(cluster, gang_namespace, body)
    wait_completed(cluster, gang_namespace, name, timeout=150)
    nodes = [p for p in pods(cluster, gang_namespace, name) if "-node-" in p.metadata.name]
    assert len(nodes) == 4


def test_a_jobset_started_in_order_runs(cluster: Any, gang_namespace: str) -> None:
    pool = unique("in-order")
    cluster.create_gpu_nodes(pool, 1, 4, labels={POOL_LABEL: pool})
    name = unique("in-order")
    body = jobset(
        name,
        gang_namespace,
        [
            replicated_job("leader", gpu_template(pool, 1, run_for=RUN_SECONDS)),
            replicated_job("workers", gpu_template(pool, 1, run_for=RUN_SECONDS), parallelism=3),
        ],
        startup_policy="InOrder",
    )
    create(cluster, gang_namespace, body)
    wait_completed(cluster, gang_namespace, name, timeout=150)
