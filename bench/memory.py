"""Resident memory of gangkeeper's processes with their caches full (5,000 nodes, 50,000
pods): admission (`serve --no-controller`) and the gang controller (`serve
--controller-only`), each judged against the target.

Baseline: the same process freshly started on the near-empty sandbox. Then the nodes
(8 GPUs each) and the pods (bound straight to them with `spec.nodeName`, so no
scheduler work; most hold one GPU, the way a busy GPU cluster looks) are created in
the sandbox's API server while gangkeeper is stopped, and it is started again: its
/readyz turns ready only after every watched resource has been listed, so the caches
then hold all of it.
VmRSS (and the peak, VmHWM) come from /proc/<pid>/status. Target ≤ 300 MB.

Pure part: `read_status_kb`, `memory_rows`. Live part: creates nodes labelled
`bench.gangkeeper.io/fleet=memory` and pods in `bench-memory` of the cluster it is
given, restarts that cluster's gangkeeper processes, reads their /proc status.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.cluster import BenchCluster

NAMESPACE = "bench-memory"
FLEET = "memory"
GPUS_PER_NODE = 8
TARGET_MB = 300.0
#: The target is stated for this many pods; a smaller (--quick) run cannot meet or miss it.
TARGET_PODS = 50000
#: Enough requests in flight to keep the API server busy; more only queue.
WORKERS = 6


def read_status_kb(status: str, field: str) -> int:
    """A `kB` field (VmRSS, VmHWM, ...) of /proc/<pid>/status text, in kB."""
    for line in status.splitlines():
        name, sep, value = line.partition(":")
        if sep and name == field:
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                return int(parts[0])
            raise ValueError(f"/proc status field {field} is not '<n> kB': {value.strip()!r}")
    raise ValueError(f"/proc status has no field {field}")


def process_memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a live process in MB (10^6 bytes)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return (
        read_status_kb(status, "VmRSS") * 1024 / 1e6,
        read_status_kb(status, "VmHWM") * 1024 / 1e6,
    )


def memory_rows(
    *, nodes: int, pods: int, baseline_mb: float, rss_mb: float, peak_mb: float, sync_s: float,
    process: str = "gangkeeper",
) -> list[dict[str, Any]]:
    """The baseline and caches-full rows of one process (`gangkeeper`: admission,
    `gangkeeper-controller`: the gang controller, each judged against the target)."""
    return [
        {"process": process, "state": "fresh start (baseline)", "nodes": 0, "pods": 0,
         "rss_mb": round(baseline_mb, 1), "vs_baseline": 1.0},
        {"process": process, "state": "caches full", "nodes": nodes, "pods": pods,
         "rss_mb": round(rss_mb, 1), "vs_baseline": round(rss_mb / baseline_mb, 2),
         "added_mb": round(rss_mb - baseline_mb, 1),
         "kb_per_pod": round((rss_mb - baseline_mb) * 1e3 / pods, 2) if pods else None,
         "peak_mb": round(peak_mb, 1), "sync_s": round(sync_s, 1),
         "target": f"≤ {TARGET_MB:g} MB at {TARGET_PODS:,} pods",
         "met": rss_mb <= TARGET_MB if pods >= TARGET_PODS else None},
    ]  # fmt: skip


def memory_node(index: int) -> dict[str, Any]:
    from bench.scheduling import FLEET_LABEL, GPU

    capacity = {"cpu": "128", "memory": "1Ti", "pods": "110", GPU: str(GPUS_PER_NODE)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"bench-{FLEET}-{index:05d}",
            "labels": {
                FLEET_LABEL: FLEET,
                "kubernetes.io/hostname": f"bench-{FLEET}-{index:05d}",
                "node.kubernetes.io/instance-type": ("p4d.24xlarge", "p5.48xlarge")[index % 2],
                "topology.kubernetes.io/zone": f"zone-{index % 3}",
            },
        },
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def memory_pod(index: int, node_count: int) -> dict[str, Any]:
    """Pod `index`, bound to a node round-robin; 8 of every 10 hold a GPU."""
    from bench.scheduling import GPU

    node = f"bench-{FLEET}-{index % node_count:05d}"
    gpu = (index // node_count) % 10 < GPUS_PER_NODE
    requests = {"cpu": "2", "memory": "8Gi", **({GPU: "1"} if gpu else {})}
    limits = {"memory": "8Gi", **({GPU: "1"} if gpu else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"mem-{index:06d}",
            "labels": {"app": "trainer", "job": f"job-{index // 8:05d}"},
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.invalid/train:bench",
                    "env": [{"name": "RANK", "value": str(index % 8)}],
                    "resources": {"requests": requests, "limits": limits},
                }
            ],
        },
    }


def _parallel(call: Callable[[int], None], indices: range, workers: int = WORKERS) -> None:
    """call(i) for every index on a pool; the first error is raised after all were tried."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            call(i)
        except Exception as exc:
            errors.append(exc)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench-mem") as pool:
        list(pool.map(guarded, indices))
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(indices)} API calls failed; first: {errors[0]}")


def _settled_rss(pid: int, seconds: float = 3.0) -> tuple[float, float]:
    """RSS once it stops moving (watch events still landing would grow it)."""
    last = process_memory_mb(pid)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(seconds)
        now = process_memory_mb(pid)
        if abs(now[0] - last[0]) <= 0.01 * last[0]:
            return now
        last = now
    return last


def run(quick: bool, cluster: BenchCluster | None = None) -> list[dict[str, Any]]:
    from bench.cluster import open_cluster

    if cluster is None:
        with open_cluster(quick=quick) as own:
            return run(quick, own)
    nodes, pods = (200, 2000) if quick else (5000, 50000)
    raw = cluster.raw

    cluster.restart_gangkeeper()
    # Each of gangkeeper's processes (admission and the controller, unless the sandbox
    # runs one): both watch pods, so each holds caches.
    processes = cluster.gangkeeper_processes()
    baselines = {name: _settled_rss(cluster.gangkeeper_pid(name))[0] for name in processes}
    cluster.log(f"memory: baseline {baselines} MB; creating {nodes} nodes, {pods} pods")
    # gangkeeper would parse every watch event of the bulk create, taking CPU from the
    # API server on a 2-core machine; it is restarted (and lists everything) afterwards.
    cluster.sandbox.stop_gangkeeper()
    started = time.monotonic()

    def create_node(i: int) -> None:
        # A Node's status (capacity, allocatable) given at create time is kept.
        raw.create("/api/v1/nodes", memory_node(i))

    def create_pod(i: int) -> None:
        raw.create(f"/api/v1/namespaces/{NAMESPACE}/pods", memory_pod(i, nodes))

    _parallel(create_node, range(nodes))
    _parallel(create_pod, range(pods))
    cluster.log(f"memory: created in {time.monotonic() - started:.0f} s; starting gangkeeper")
    sync_s = cluster.restart_gangkeeper()
    rows: list[dict[str, Any]] = []
    for name in processes:
        rss_mb, peak_mb = _settled_rss(cluster.gangkeeper_pid(name))
        cluster.log(f"memory: {name} {rss_mb:.0f} MB after a {sync_s:.0f} s sync")
        rows += memory_rows(
            nodes=nodes, pods=pods, baseline_mb=baselines[name], rss_mb=rss_mb,
            peak_mb=peak_mb, sync_s=sync_s, process=name,
        )  # fmt: skip
    return rows


if __name__ == "__main__":  # pragma: no cover - manual entry point
    import sys

    from bench.report import print_rows

    print_rows("memory", run("--quick" in sys.argv[1:]))
