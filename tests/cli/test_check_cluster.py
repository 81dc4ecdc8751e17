"""`gangkeeper check --kubeconfig`: the fleet is the cluster's Nodes, less what its bound
pods hold, read through the same `Api` every other command uses (here the in-memory one).
"""

from __future__ import annotations

from typing import Any

from builders.gangs import node

from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.cli.check import capacity_of
from gangkeeper.webhook.kube.fake import FakeApi


def pod(name: str, gpus: int, node_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [
        {"name": "trainer", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}}


def test_the_cluster_fleet_counts_its_gpu_and_plain_nodes_and_only_the_bound_pods() -> None:
    api = FakeApi()
    api.seed("/api/v1/nodes", node("gpu-a", 8), node("gpu-b", 8), node("cpu-a", 0))
    api.seed("/api/v1/pods", pod("running", 6, "gpu-a"), pod("pending", 8, None))
    described = capacity_of(api, Config())[0].describe()
    assert (described["nodes"], described["nodesWithoutGpus"], described["boundPods"]) == (
        2, 1, 1)


def test_the_pods_are_listed_without_the_finished_ones() -> None:
    api = FakeApi()
    capacity_of(api, Config())
    pods = [query for method, path, query in api.calls if path == "/api/v1/pods"]
    assert [q.get("fieldSelector") for q in pods] == [
        "status.phase!=Succeeded,status.phase!=Failed"]
