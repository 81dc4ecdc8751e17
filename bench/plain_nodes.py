"""What keeping nodes without GPUs costs: memory at 5,000 such nodes, and planning time.

Gangs whose members ask no GPUs are placed, held and refused on every node, so the
webhook's `Capacity` and the controller (its slim Node copies, the `Planner`'s facts)
keep nodes without GPUs too. This measures, with tracemalloc, the bytes each keeps for
N such nodes shaped like real ones (a dozen labels, allocatable memory differing by a
few KiB from node to node, a Ready condition, kilobytes of images and managedFields
that the controller drops), and the CPU of one planning pass for a GPU gang with and
without them beside 1,000 GPU nodes (what GPU gangs pay for the CPU nodes now seen).

`python -m bench.plain_nodes [--nodes 5000]` prints the figures (docs/performance.md).
Pure: builds dicts in memory; no cluster, no files.
"""

from __future__ import annotations

import argparse
import copy
import gc
import time
import tracemalloc
from collections.abc import Callable
from typing import Any, TypeVar

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.cluster.node_facts import node_fields, read_node
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.planner import Planner
from gangkeeper.policies.settings.config import Config

CFG = Config()
T = TypeVar("T")


def cpu_node(index: int) -> dict[str, Any]:
    """A Node without GPUs as the API server sends it (8 instance types, 3 zones)."""
    name = f"cpu-{index:05d}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": f"m6i.{2 ** (index % 8)}xlarge",
        "beta.kubernetes.io/instance-type": f"m6i.{2 ** (index % 8)}xlarge",
        "topology.kubernetes.io/zone": f"us-east-1{'abc'[index % 3]}",
        "topology.kubernetes.io/region": "us-east-1",
        "failure-domain.beta.kubernetes.io/zone": f"us-east-1{'abc'[index % 3]}",
        "eks.amazonaws.com/nodegroup": f"general-{index % 8}",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name, "labels": labels, "uid": f"uid-{name}", "resourceVersion": "1",
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {"x": "y" * 400}}}],
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{index:017x}"},
        "status": {
            "allocatable": {
                "cpu": "31850m", "memory": f"{126_000_000 + index % 97 * 4}Ki",
                "ephemeral-storage": "95491281146", "pods": "110",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0",
            },
            "capacity": {"cpu": "32", "memory": "130000000Ki", "pods": "110"},
            "conditions": [
                {"type": t, "status": "False" if t != "Ready" else "True",
                 "lastHeartbeatTime": "2026-12-02T12:00:00Z", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status"}
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
            ],
            "images": [{"names": [f"registry/image-{i}@sha256:{'0' * 64}"], "sizeBytes": 1}
                       for i in range(20)],
        },
    }


def gpu_node(index: int) -> dict[str, Any]:
    name = f"gpu-{index:05d}"
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1Ti",
                                   "pods": "110"}},
    }


def retained(build: Callable[[], T]) -> tuple[int, T]:
    """Bytes still allocated once `build` returned (its result kept alive)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, kept


def gang_pods(size: int) -> list[Any]:
    pods = []
    for i in range(size):
        pods.append(pod_info({
            "metadata": {
                "name": f"g-{i}", "namespace": "ns", "uid": f"g-{i}", "resourceVersion": "1",
                "creationTimestamp": "2027-01-15T08:00:00Z", "labels": {"gangkeeper.io/gang": "g"},
                "annotations": {"gangkeeper.io/gang-name": "g",
                                "gangkeeper.io/min-member": str(size)},
            },
            "spec": {"schedulingGates": [{"name": "gangkeeper.io/gang"}], "containers": [
                {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
        }, CFG))
    return pods


def pass_seconds(nodes: list[dict[str, Any]], repeat: int = 5) -> float:
    """Best of `repeat` planning passes (a warm `Planner`, as the controller runs them)."""
    planner = Planner(CFG)
    pods = gang_pods(16)
    planner.plan(pods, nodes, 0.0)
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        planner.plan(pods, nodes, 0.0)
        best = min(best, time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    args = parser.parse_args(argv)
    raw = [cpu_node(i) for i in range(args.nodes)]
    capacity, _ = retained(lambda: Capacity.from_nodes(raw, CFG))
    # Each slim copy from a Node of its own (as the watch gives them), the Node dropped:
    # what is counted is what the slim copy keeps alive.
    slim_bytes, slim = retained(lambda: [node_fields(copy.deepcopy(n)) for n in raw])
    facts, _ = retained(lambda: [read_node(n, CFG) for n in slim if n is not None])
    empty, _ = retained(lambda: Capacity(CFG))
    n = args.nodes
    print(f"{n} nodes without GPUs:")
    for what, size in (
        ("webhook Capacity", capacity - empty),
        ("controller slim Node copies", slim_bytes),
        ("controller NodeFacts (Planner)", facts),
    ):
        print(f"  {what}: {size / 1e6:.2f} MB ({size / n:.0f} B/node)")
    gpus = [gpu_node(i) for i in range(1000)]
    alone = pass_seconds(gpus)
    beside = pass_seconds([*gpus, *(s for s in slim if s is not None)])
    print(f"planning pass, 16-member GPU gang on 1,000 GPU nodes: {alone * 1e3:.1f} ms; "
          f"with the {n} nodes without GPUs beside: {beside * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
