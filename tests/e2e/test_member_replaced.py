"""A running member of a released gang deleted: its owner creates a replacement, the
webhook gates it like any member, and the controller releases it at once (rule 2 of
the plan: a gang partly released is never left that way) — counted
(`gangkeeper_gang_rejoined_pods_total`) and evented (`GangMemberRejoined`, Normal).

An Indexed Job of 4 one-GPU workers on the sandbox (the real Job controller makes the
replacement; kwok runs the pods). No mocks.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders.cluster import POOL_LABEL, indexed_job, unique
from builders.controllers import is_ready
from builders.faults import events, gated, metrics

REJOINED = "gangkeeper_gang_rejoined_pods_total"


def workers(cluster: Any, namespace: str) -> list[Any]:
    return list(cluster.core.list_namespaced_pod(namespace, label_selector="job-name=train").items)


def test_a_deleted_member_of_a_released_gang_is_replaced_and_released_at_once(
    cluster: Any, gang_namespace: str
) -> None:
    pool = unique("replace")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    job = indexed_job("train", gang_namespace, pool, workers=4, gpus=1)
    job["spec"]["backoffLimit"] = 4  # a deleted pod counts as a failure: allow a retry
    cluster.batch.create_namespaced_job(gang_namespace, job)
    cluster.wait_for(
        lambda: sum(1 for p in workers(cluster, gang_namespace) if is_ready(p)) == 4,
        timeout=90, message="the 4 workers running",
    )
    url = cluster.sandbox.controller_url if cluster.sandbox else None
    before = metrics(cluster, url).get(REJOINED, 0.0) if url else 0.0
    [victim] = [p for p in workers(cluster, gang_namespace)
                if p.metadata.annotations.get("batch.kubernetes.io/job-completion-index") == "2"]
    cluster.core.delete_namespaced_pod(victim.metadata.name, gang_namespace,
                                       grace_period_seconds=0)

    def replacement() -> Any:
        for pod in workers(cluster, gang_namespace):
            index = pod.metadata.annotations.get("batch.kubernetes.io/job-completion-index")
            if index == "2" and pod.metadata.uid != victim.metadata.uid:
                return pod
        return None

    new = cluster.wait_for(replacement, timeout=60, message="the Job's replacement pod")
    # It was gated at creation like every member (the webhook does not know it replaces).
    created = cluster.core.read_namespaced_pod(new.metadata.name, gang_namespace)
    cluster.wait_for(
        lambda: is_ready(cluster.core.read_namespaced_pod(new.metadata.name, gang_namespace)),
        timeout=60, message="the replacement released, bound and running",
    )
    assert not gated(cluster.core.read_namespaced_pod(new.metadata.name, gang_namespace))
    assert created.metadata.labels.get("gangkeeper.io/gang"), "gang-keyed like its peers"
    assert sum(1 for p in workers(cluster, gang_namespace) if is_ready(p)) == 4, "whole again"

    def rejoined_event() -> list[dict[str, Any]]:
        return [e for e in events(cluster, gang_namespace)
                if e["reason"] == "GangMemberRejoined"
                and e["regarding"]["name"] == new.metadata.name]

    [event] = cluster.wait_for(rejoined_event, timeout=30, message="GangMemberRejoined Event")
    assert event["type"] == "Normal"
    assert "3 of its members were released already" in event["note"]
    if url is None:
        pytest.skip("the metric is read from the sandbox's gangkeeper process")
    assert metrics(cluster, url).get(REJOINED, 0.0) - before == 1
