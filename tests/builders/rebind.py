"""Bringing a released gang back on the sandbox (issue 12's watchdog): members held by
another system's gate while gangkeeper releases and pins them, a pod of no gang that
takes a pinned node, and the owner states the tests read.

Test helpers only: reads and patches objects through the test's API clients.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from builders.cluster import gang_pod
from builders.controllers import is_gated, pinned_node, pods_of
from gangkeeper.policies.names import PIN_LABEL

HOLD = "e2e.gangkeeper.io/hold"


def lift_hold(cluster: Any, namespace: str, pod: Any) -> None:
    gates = [{"name": g.name} for g in pod.spec.scheduling_gates or [] if g.name != HOLD]
    cluster.core.patch_namespaced_pod(
        pod.metadata.name, namespace,
        [{"op": "replace", "path": "/spec/schedulingGates", "value": gates}],
    )  # fmt: skip


def job_failed(cluster: Any, namespace: str, name: str) -> bool:
    status = cluster.batch.read_namespaced_job(name, namespace).status
    return any(c.type == "Failed" and c.status == "True" for c in status.conditions or [])


def hold_and_take_a_pinned_node(
    cluster: Any, namespace: str, plain_namespace: str, pool: str, count: int
) -> tuple[list[Any], str]:
    """Once the `count` members are released and pinned (still held by another
    system's gate, so not in flight: nothing counts their room), a pod of no gang
    takes the first one's pinned node; then the holds go. Returns the members as
    released and the node taken."""
    pinned = cluster.wait_for(
        lambda: (found := pods_of(cluster, namespace))
        and len(found) == count
        and all(not is_gated(p) and pinned_node(p) for p in found)
        and found,
        timeout=60,
        message=f"the {count} members released and pinned (still held)",
    )
    taken = pinned_node(pinned[0])
    thief = gang_pod("thief", pool, gpus=8)
    thief["spec"]["nodeSelector"][PIN_LABEL] = taken
    cluster.core.create_namespaced_pod(plain_namespace, thief)
    cluster.wait_for(
        lambda: cluster.core.read_namespaced_pod("thief", plain_namespace).spec.node_name,
        timeout=30,
        message="the pod of no gang bound to a pinned node",
    )
    for pod in pinned:
        lift_hold(cluster, namespace, pod)
    return pinned, taken


def whole_again(cluster: Any, namespace: str, count: int) -> list[Any] | None:
    """The members once all `count` are bound; lifts the hold of recreated members as
    gangkeeper releases them."""
    found = [p for p in pods_of(cluster, namespace) if not p.metadata.deletion_timestamp]
    for pod in found:
        if any(g.name == HOLD for g in pod.spec.scheduling_gates or []) and not is_gated(pod):
            lift_hold(cluster, namespace, pod)
    if len(found) == count and all(p.spec.node_name for p in found):
        return found
    return None


def jobset_failed(cluster: Any, namespace: str, name: str) -> bool:
    found = cluster.custom.get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name
    )  # fmt: skip
    return any(c.get("type") == "Failed" and c.get("status") == "True"
               for c in (found.get("status") or {}).get("conditions") or [])


def recreated_and_gated(
    cluster: Any, namespace: str, first: set[str], count: int,
    healthy: Callable[[], None] = lambda: None,
) -> list[Any] | None:
    """The `count` members once every one is new (no uid of `first`), gated and bound
    nowhere — the gang waiting whole, holding no GPU; `healthy` asserts the owner has
    not failed meanwhile."""
    healthy()
    found = [p for p in pods_of(cluster, namespace) if not p.metadata.deletion_timestamp]
    if len(found) != count or {p.metadata.uid for p in found} & first:
        return None
    assert not any(p.spec.node_name for p in found), [p.spec.node_name for p in found]
    return found if all(is_gated(p) for p in found) else None
