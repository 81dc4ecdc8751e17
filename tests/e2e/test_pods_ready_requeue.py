"""A gang bound whole but never Ready is requeued (`podsReadyRequeue: true`, issue 12),
on the sandbox: kwok keeps the pods Running but not Ready (its pod-ready Stage waits
for the `pod-ready.stage.kwok.x-k8s.io/delay` annotation), as an image that never
pulls or a crash loop would.

After `podsReadyTimeoutSeconds` the controller posts `GangNotReady`, suspends the Job
(so the Job controller deletes its pods without counting failures: `backoffLimit: 0`
holds) and resumes it; the new pods are placed anew. It does so at most
`rebindRetries` times: the next instance, never Ready either, gets its `GangNotReady`
Event and is left alone. No API server, scheduler or controller is mocked.
"""

from __future__ import annotations

from typing import Any

from builders.cluster import POOL_LABEL, indexed_job, unique
from builders.controllers import is_bound

from gangkeeper.policies.names import REQUEUES_ANNOTATION

#: kwok's pod-ready Stage waits this long before a pod is Ready: never, for the test.
NEVER_READY = {"pod-ready.stage.kwok.x-k8s.io/delay": "3600s"}


def events(cluster: Any, namespace: str, reason: str, kind: str = "Job") -> list[Any]:
    return [
        e for e in cluster.core.list_namespaced_event(namespace).items
        if e.reason == reason and e.involved_object.kind == kind
    ]


def test_a_gang_never_ready_is_requeued_within_its_retries_and_the_job_does_not_fail(
    cluster: Any, gang_namespace: str
) -> None:
    pool = unique("unready")
    cluster.create_gpu_nodes(pool, 2, 8, labels={POOL_LABEL: pool})
    with cluster.gangkeeper_configured(
        podsReadyRequeue=True, podsReadyTimeoutSeconds=3, rebindRetries=1
    ):
        job = indexed_job("slow", gang_namespace, pool, workers=2, gpus=8)
        job["spec"]["template"]["metadata"] = {"annotations": dict(NEVER_READY)}
        cluster.batch.create_namespaced_job(gang_namespace, job)

        def bound(exclude: set[str]) -> set[str] | None:
            pods = cluster.core.list_namespaced_pod(gang_namespace).items
            live = [p for p in pods if not p.metadata.deletion_timestamp]
            uids = {p.metadata.uid for p in live}
            fresh = len(live) == 2 and not uids & exclude and all(is_bound(p) for p in live)
            return uids if fresh else None

        first = cluster.wait_for(lambda: bound(set()), timeout=60, message="the gang bound")
        second = cluster.wait_for(
            lambda: bound(first), timeout=90, message="the gang requeued and bound anew"
        )
        requeued = events(cluster, gang_namespace, "GangRequeued")
        assert requeued and "not Ready" in requeued[0].message, [e.message for e in requeued]
        # The second instance is not Ready either: its own GangNotReady Event comes,
        # and with the one retry spent it is not requeued again.
        cluster.wait_for(
            lambda: len(events(cluster, gang_namespace, "GangNotReady")) >= 2,
            timeout=60,
            message="a GangNotReady Event per gang instance",
        )
        found = cluster.batch.read_namespaced_job("slow", gang_namespace)
        assert (found.metadata.annotations or {}).get(REQUEUES_ANNOTATION) == "1"
        assert not found.spec.suspend
        assert not found.status.failed, found.status
        assert bound(first) == second  # still the second instance, bound
        assert len(events(cluster, gang_namespace, "GangRequeued")) == 1
