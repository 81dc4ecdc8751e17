"""Pods through the real API server: gang-keyed where opted in, untouched elsewhere.

The pod read back from the API server is what the scheduler and controller will see,
after the API server applied gangkeeper's JSONPatch and validated the result.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, gang_pod, unique
from kubernetes.client.exceptions import ApiException

from gangkeeper.policies.names import GATE


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


#: backend -> (schedulerName the pod must get, where the PodGroup name must appear).
#: Scheduler names are the documented defaults (docs/configuration.md, backends table).
BACKENDS = {
    "gate": ("default-scheduler", None),
    "coscheduling": ("scheduler-plugins-scheduler", ("label", "scheduling.x-k8s.io/pod-group")),
    "volcano": ("volcano", ("annotation", "scheduling.k8s.io/group-name")),
    # Stored only because the sandbox serves the native gang API (GenericWorkload).
    "native": ("default-scheduler", ("spec", "schedulingGroup.podGroupName")),
}


def _group_key(pod: dict[str, Any], where: str, key: str) -> str | None:
    if where == "label":
        return pod["metadata"]["labels"].get(key)
    if where == "annotation":
        return pod["metadata"]["annotations"].get(key)
    return (pod["spec"].get("schedulingGroup") or {}).get("podGroupName")


@pytest.mark.parametrize("backend_namespace", list(BACKENDS), indirect=True)
def test_a_gang_pod_in_an_opted_in_namespace_is_stored_with_the_backends_keys_gate_and_scheduler(
    cluster: Any, backend_namespace: str, request: pytest.FixtureRequest
) -> None:
    backend = request.node.callspec.params["backend_namespace"]
    scheduler, group_key = BACKENDS[backend]
    pool = unique("keys")
    cluster.create_gpu_nodes(pool, 2, 1, labels={POOL_LABEL: pool})
    # minMember 2 with one pod: the gang is incomplete, so the controller keeps the gate.
    cluster.core.create_namespaced_pod(
        backend_namespace, gang_pod("worker-0", pool, gang="llama-ft", min_member=2)
    )

    pod = _pod(cluster, backend_namespace, "worker-0")

    labels = pod["metadata"]["labels"]
    annotations = pod["metadata"]["annotations"]
    gang = labels["gangkeeper.io/gang"]
    assert gang, "gang label missing"
    assert annotations["gangkeeper.io/gang-name"] == "llama-ft"
    assert annotations["gangkeeper.io/min-member"] == "2"
    assert annotations["gangkeeper.io/backend"] == backend
    assert _gates(pod) == [GATE]
    assert pod["spec"]["schedulerName"] == scheduler
    if group_key is not None:
        assert _group_key(pod, *group_key) == gang, f"{group_key} does not name the gang"
    else:
        assert "scheduling.x-k8s.io/pod-group" not in labels
        assert "scheduling.k8s.io/group-name" not in annotations
        assert not pod["spec"].get("schedulingGroup")
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
