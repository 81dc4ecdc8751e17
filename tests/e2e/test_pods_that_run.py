"""The seed story with pods that really start: kwok plays the kubelet, so bound pods
become Running and Ready and finish after their duration, and the Job and JobSet
controllers complete their workloads.

1. An Indexed Job of 8 x 1 GPU on 8 GPUs of which 3 are taken: none binds while
   5 are free; once the blocker is gone all 8 bind, run, and the Job completes.
2. The same JobSet in a namespace gangkeeper does not manage and in one it does, with
   fewer GPUs free than it needs: without gangkeeper it ends partly bound (GPUs held
   by pods that cannot train); with it none binds until the GPUs are free, then all do.
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

GPU_POD_SECONDS = "4s"
#: Long enough for kube-scheduler to have bound any pod it could (it binds in ms).
SETTLE_SECONDS = 3.0


def _pods(cluster: Any, namespace: str, selector: str) -> list[Any]:
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def test_eight_job_workers_wait_on_five_free_gpus_then_run_whole_and_the_job_completes(
    cluster: Any, gang_namespace: str, plain_namespace: str
) -> None:
    pool = unique("seed-run")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    blocker = run_blocker(cluster, plain_namespace, pool, 3)
    name = unique("seed")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": gang_namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": 8,
            "parallelism": 8,
            "backoffLimit": 0,
            "template": gpu_template(pool, 1, run_for=GPU_POD_SECONDS),
        },
    }
    selector = f"batch.kubernetes.io/job-name={name}"
    with recording(cluster, gang_namespace, selector) as seen:
        cluster.batch.create_namespaced_job(gang_namespace, job)
        cluster.wait_for(
            lambda: len(_pods(cluster, gang_namespace, selector)) == 8,
            timeout=60,
            message="the Job controller creating 8 pods",
        )
        # Five GPUs are free: the stock scheduler alone would bind five of them by now.
        time.sleep(SETTLE_SECONDS)
        pods = _pods(cluster, gang_namespace, selector)
        assert all(is_gated(p) for p in pods), [p.metadata.name for p in pods if not is_gated(p)]
        assert not [p for p in pods if p.spec.node_name], "a member bound while 5 GPUs were free"

        cluster.core.delete_namespaced_pod(blocker, plain_namespace)
        cluster.wait_for(
            lambda: sum(is_ready(p) for p in _pods(cluster, gang_namespace, selector)) == 8,
            timeout=90,
            message="all 8 members Running and Ready",
        )
        assert all(seen.gated_at_creation().values()), seen.gated_at_creation()
    cluster.wait_for(
        lambda: any(
            c.type == "Complete" and c.status == "True"
            for c in cluster.batch.read_namespaced_job(name, gang_namespace).status.conditions
            or ()
        ),
        timeout=90,
        message=f"Job {name} Complete after its pods ran {GPU_POD_SECONDS}",
    )


def _small_fleet_jobset(name: str, namespace: str, pool: str) -> dict[str, Any]:
    # 4 workers x 2 GPUs = 8 on a fleet of 3 nodes x 2 GPUs = 6.
    return jobset(
        name,
        namespace,
        [replicated_job("workers", gpu_template(pool, 2, run_for="600s"), parallelism=4)],
    )


def test_a_jobset_bigger_than_the_free_gpus_ends_partly_bound_without_gangkeeper_not_with(
    cluster: Any, gang_namespace: str, plain_namespace: str
) -> None:
    pool = unique("partial")
    cluster.create_gpu_nodes(pool, 4, 2, labels={POOL_LABEL: pool})
    # 2 of the 8 GPUs taken by a pod gangkeeper does not manage: 6 free.
    blocker = run_blocker(cluster, plain_namespace, pool, 2)

    plain = unique("unmanaged")
    cluster.custom.create_namespaced_custom_object(
        "jobset.x-k8s.io",
        "v1alpha2",
        plain_namespace,
        "jobsets",
        _four_workers(plain, plain_namespace, pool),
    )
    plain_selector = f"{JOBSET_NAME_LABEL}={plain}"
    cluster.wait_for(
        lambda: sum(is_ready(p) for p in _pods(cluster, plain_namespace, plain_selector)) == 3,
        timeout=90,
        message="3 of the unmanaged JobSet's 4 workers running",
    )
    time.sleep(SETTLE_SECONDS)
    unmanaged = _pods(cluster, plain_namespace, plain_selector)
    assert len(unmanaged) == 4
    assert len([p for p in unmanaged if not p.spec.node_name]) == 1, (
        "the seed's failure: 6 GPUs held by 3 workers that cannot train without the 4th"
    )
    cluster.custom.delete_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", plain_namespace, "jobsets", plain,
        propagation_policy="Foreground",
    )  # fmt: skip
    cluster.wait_for(
        lambda: not _pods(cluster, plain_namespace, plain_selector),
        timeout=90,
        message="the unmanaged JobSet's pods gone",
    )

    managed = unique("managed")
    selector = f"{JOBSET_NAME_LABEL}={managed}"
    cluster.custom.create_namespaced_custom_object(
        "jobset.x-k8s.io",
        "v1alpha2",
        gang_namespace,
        "jobsets",
        _four_workers(managed, gang_namespace, pool),
    )
    cluster.wait_for(
        lambda: len(_pods(cluster, gang_namespace, selector)) == 4,
        timeout=60,
        message="the managed JobSet's 4 workers created",
    )
    time.sleep(SETTLE_SECONDS)
    pods = _pods(cluster, gang_namespace, selector)
    assert all(is_gated(p) for p in pods) and not [p for p in pods if p.spec.node_name]

    cluster.core.delete_namespaced_pod(blocker, plain_namespace)
    cluster.wait_for(
        lambda: sum(is_ready(p) for p in _pods(cluster, gang_namespace, selector)) == 4,
        timeout=90,
        message="all 4 workers running once 8 GPUs are free",
    )
    js = cluster.custom.get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", gang_namespace, "jobsets", managed
    )
    assert not condition(js, "Failed"), js.get("status")


def _four_workers(name: str, namespace: str, pool: str) -> dict[str, Any]:
    # 4 workers x 2 GPUs = 8: fits the fleet, not the 6 GPUs left free.
    return jobset(
        name,
        namespace,
        [replicated_job("workers", gpu_template(pool, 2, run_for="600s"), parallelism=4)],
    )
