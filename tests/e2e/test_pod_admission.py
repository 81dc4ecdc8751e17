"""Pods through the real API server: gang-keyed where opted in, untouched elsewhere.

The pod read back from the API server is what the scheduler and controller will see,
after the API server applied gangkeeper's JSONPatch and validated the result.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from e2e_objects import GATE, POOL_LABEL, gang_pod, unique
from kubernetes.client.exceptions import ApiException


def _pod(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    raw: dict[str, Any] = cluster.api_client.sanitize_for_serialization(
        cluster.core.read_namespaced_pod(name, namespace)
    )
    return raw


def _gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


def _gangkeeper_keys(pod: dict[str, Any]) -> dict[str, str]:
    meta = pod["metadata"]
    keys = {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}
    return {k: v for k, v in keys.items() if k.startswith("gangkeeper.io/")}


def test_a_gang_pod_in_an_opted_in_namespace_is_stored_with_gang_keys_gate_and_scheduler(
    cluster: Any, gang_namespace: str
) -> None:
    pool = unique("keys")
    cluster.create_gpu_nodes(pool, 2, 1, labels={POOL_LABEL: pool})
    # minMember 2 with one pod: the gang is incomplete, so the controller keeps the gate.
    cluster.core.create_namespaced_pod(
        gang_namespace, gang_pod("worker-0", pool, gang="llama-ft", min_member=2)
    )

    pod = _pod(cluster, gang_namespace, "worker-0")

    labels = pod["metadata"]["labels"]
    annotations = pod["metadata"]["annotations"]
    assert labels["gangkeeper.io/gang"], "gang label missing"
    assert annotations["gangkeeper.io/gang-name"] == "llama-ft"
    assert annotations["gangkeeper.io/min-member"] == "2"
    assert annotations["gangkeeper.io/backend"] == "gate"
    assert _gates(pod) == [GATE]
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    # Gated: the real scheduler must not have bound it.
    assert not pod["spec"].get("nodeName")


@pytest.mark.parametrize(
    ("where", "skip_label"),
    [
        ("namespace without the opt-in label", False),
        ("kube-system", False),
        ("opted-in namespace, pod labelled gangkeeper.io/skip", True),
    ],
)
def test_a_pod_gangkeeper_must_not_match_is_stored_exactly_as_sent(
    cluster: Any, gang_namespace: str, plain_namespace: str, where: str, skip_label: bool
) -> None:
    namespace = {
        "namespace without the opt-in label": plain_namespace,
        "kube-system": "kube-system",
        "opted-in namespace, pod labelled gangkeeper.io/skip": gang_namespace,
    }[where]
    pool = unique("untouched")
    labels = {"gangkeeper.io/skip": "true"} if skip_label else {}
    sent = gang_pod(unique("pod"), pool, gang="would-be-gang", min_member=2, labels=labels)
    name = sent["metadata"]["name"]
    cluster.core.create_namespaced_pod(namespace, sent)
    try:
        pod = _pod(cluster, namespace, name)
        assert _gates(pod) == []
        assert _gangkeeper_keys(pod) == {
            **labels,
            **sent["metadata"]["annotations"],
        }, "gangkeeper added keys to a pod it must not touch"
        assert pod["spec"]["schedulerName"] == "default-scheduler"
    finally:
        with contextlib.suppress(ApiException):
            cluster.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
