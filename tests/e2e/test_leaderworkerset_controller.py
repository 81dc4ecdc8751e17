"""LeaderWorkerSets run by the real LeaderWorkerSet controller (v0.7.0, with its own
webhooks), the StatefulSet controller and kwok: each group of `size` pods is its own
gang (`<lws>-<group index>`), released whole, and its pods run."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from builders.cluster import POOL_LABEL, unique
from builders.controllers import (
    LWS_NAME_LABEL,
    gpu_template,
    is_ready,
    leaderworkerset,
    recording,
)

GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"


def pods(cluster: Any, namespace: str, name: str) -> list[Any]:
    selector = f"{LWS_NAME_LABEL}={name}"
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def create(cluster: Any, namespace: str, body: dict[str, Any]) -> None:
    cluster.custom.create_namespaced_custom_object(
        "leaderworkerset.x-k8s.io", "v1", namespace, "leaderworkersets", body
    )


def _run(cluster: Any, namespace: str, startup_policy: str | None) -> None:
    pool = unique("lws")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    name = unique("lws")
    template = gpu_template(pool, 1)
    # StatefulSet pods restart Always (LWS rejects Never in its templates).
    template["spec"].pop("restartPolicy")
    body = leaderworkerset(
        name, namespace, template, size=4, replicas=2, startup_policy=startup_policy
    )
    with recording(cluster, namespace, f"{LWS_NAME_LABEL}={name}") as seen:
        create(cluster, namespace, body)
        cluster.wait_for(
            lambda: sum(is_ready(p) for p in pods(cluster, namespace, name)) == 8,
            timeout=120,
            message="both groups' 4 pods Running and Ready",
        )
        gated = seen.gated_at_creation()
    assert len(gated) == 8 and all(gated.values()), gated
    gangs: dict[str, set[str]] = defaultdict(set)
    for p in pods(cluster, namespace, name):
        gangs[p.metadata.labels["gangkeeper.io/gang"]].add(p.metadata.labels[GROUP_INDEX])
    assert dict(gangs) == {f"{name}-0": {"0"}, f"{name}-1": {"1"}}, dict(gangs)


def test_each_group_of_a_leaderworkerset_is_a_gang_released_whole_and_running(
    cluster: Any, gang_namespace: str
) -> None:
    _run(cluster, gang_namespace, None)


def test_workers_created_only_once_the_leader_is_ready_still_start(
    cluster: Any, gang_namespace: str
) -> None:
    """`startupPolicy: LeaderReady`: the controller creates a group's workers only
    after its leader is Ready, so the leader must be released before they exist."""
    _run(cluster, gang_namespace, "LeaderReady")
