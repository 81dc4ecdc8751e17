"""`python -m bench.view [--gangs N] [--nodes N]`: how long `gangkeeper view` takes to
render each page for a large cluster (default 1,000 gangs on 5,000 nodes).

The cluster is plain dicts built here (`synthetic`): 8-GPU nodes in racks of 50 (a few
cordoned or tainted), nine in ten mostly used by other pods, gangs of 2 to 8 members
asking 1 to 8 GPUs each, the older ones bound and running, the rest gated and waiting,
one in ten at a higher priority. The
snapshot is built in this process (`view.state.build`, which runs the controller's
plan) and each page rendered from it, as the server does between two reads. Prints ms
per page (best of `--repeat`); the gang page's first render includes `explain`,
which plans again, and is shown apart.

Pure computation in this process: no cluster, no server, no file written.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from gangkeeper.policies.names import GATE
from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.view import pages
from gangkeeper.webhook.view.state import ViewState, build

EPOCH = 1_800_000_000.0
GPU = "nvidia.com/gpu"
RACK = "example.com/rack"


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, gpus: int, rack: str, *, cordoned: bool = False,
         tainted: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"unschedulable": cordoned}
    if tainted:
        spec["taints"] = [{"key": "maintenance", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, RACK: rack}},
        "spec": spec,
        "status": {"allocatable": {GPU: str(gpus), "cpu": "96", "memory": "1Ti", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def member(gang: str, index: int, gpus: int, *, namespace: str, size: int, created: float,
           priority: int, node_name: str = "", owner: dict[str, str] | None = None,
           ready: bool = True) -> dict[str, Any]:
    annotations = {"gangkeeper.io/gang-name": gang, "gangkeeper.io/min-member": str(size)}
    if owner:
        annotations["gangkeeper.io/owner"] = json.dumps(owner)
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "main", "image": "trainer",
                        "resources": {"limits": {GPU: str(gpus)}}}],
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if node_name:
        spec["nodeName"] = node_name
        status = {"phase": "Running",
                  "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    else:
        spec["schedulingGates"] = [{"name": GATE}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{gang}-{index}", "namespace": namespace, "uid": f"{namespace}-{gang}-{index}",
            "creationTimestamp": _stamp(created + index),
            "labels": {"gangkeeper.io/gang": gang, "gangkeeper.io/role": "worker"},
            "annotations": annotations,
        },
        "spec": spec, "status": status,
    }


def filler(name: str, gpus: int, node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "serving", "uid": name,
                     "creationTimestamp": _stamp(EPOCH - 3600)},
        "spec": {"nodeName": node_name, "containers": [
            {"name": "main", "image": "server", "resources": {"limits": {GPU: str(gpus)}}}]},
        "status": {"phase": "Running"},
    }


Objects = list[dict[str, Any]]


def synthetic(gangs: int = 1000, nodes: int = 5000, *, gpus_per_node: int = 8,
              running: float = 0.6, rack_size: int = 50) -> tuple[Objects, Objects]:
    """The cluster: other pods on most of nine nodes in ten, the first `running` share
    of the gangs bound (first fit, node by node), the rest gated; (pods, nodes)."""
    node_list = [
        node(f"node-{i:05d}", gpus_per_node, f"rack-{i // rack_size:03d}",
             cordoned=i % 97 == 5, tainted=i % 89 == 7)
        for i in range(nodes)
    ]
    pods: list[dict[str, Any]] = [
        # Other work: most of every node but one in ten, so the gated gangs compete.
        filler(f"svc-{i:05d}", gpus_per_node - 1, node_list[i]["metadata"]["name"])
        for i in range(nodes) if i % 10
    ]
    free = [gpus_per_node if i % 10 == 0 else 1 for i in range(nodes)]
    cursor = 0
    for g in range(gangs):
        size, gpus = 2 + g % 7, (1, 2, 4, 8)[g % 4]
        namespace, name = f"team-{g % 5}", f"job-{g:04d}"
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"uid-{g}"}
        created = EPOCH + 10 * g
        bound = g < gangs * running
        for i in range(size):
            where = ""
            if bound:
                while cursor < nodes and free[cursor] < gpus:
                    cursor += 1
                if cursor < nodes:
                    free[cursor] -= gpus
                    where = node_list[cursor]["metadata"]["name"]
            pods.append(member(name, i, gpus, namespace=namespace, size=size, created=created,
                               priority=100 if g % 10 == 3 else 0, node_name=where,
                               owner=owner, ready=g % 13 != 0))
    return pods, node_list


def best(repeat: int, work: Callable[[], object]) -> float:
    """The fastest of `repeat` runs of `work`, in ms."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def measure(gangs: int, nodes: int, repeat: int = 3) -> dict[str, float]:
    pods, node_list = synthetic(gangs, nodes)
    config = load_config({"topology": [RACK]})
    now = EPOCH + 10 * gangs + 600
    state: ViewState | None = None

    def snapshot() -> None:
        nonlocal state
        state = build(pods, node_list, config, now)

    figures = {"snapshot (plan + queue + fleet)": best(repeat, snapshot)}
    assert state is not None
    done: ViewState = state
    waiting = next(r for r in done.rows if r.position)
    token = "t" * 32
    figures["queue page"] = best(repeat, lambda: pages.queue_page(done, token))
    figures["queue page, one namespace waiting"] = best(
        repeat, lambda: pages.queue_page(done, token, namespace="team-1", which="waiting"))
    figures["gang page, first (runs explain)"] = best(
        1, lambda: pages.gang_page(done, waiting.key, token))
    figures["gang page, again"] = best(repeat, lambda: pages.gang_page(done, waiting.key, token))
    figures["fleet page (one row per shape)"] = best(repeat, lambda: pages.fleet_page(done, token))
    wide = build(pods, node_list, config, now, aggregate_above=nodes)
    figures["fleet page (every node)"] = best(repeat, lambda: pages.fleet_page(wide, token))
    figures["/api/state JSON"] = best(
        repeat, lambda: json.dumps(pages.state_json(done, token)))
    return figures


def run(quick: bool) -> list[dict[str, Any]]:
    """`python -m bench`'s entry: one row per page (100 gangs / 500 nodes with --quick)."""
    gangs, nodes, repeat = (100, 500, 1) if quick else (1000, 5000, 3)
    return [{"page": page, "ms": round(ms, 2), "gangs": gangs, "nodes": nodes}
            for page, ms in measure(gangs, nodes, repeat).items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.view", description=__doc__)
    parser.add_argument("--gangs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    figures = measure(args.gangs, args.nodes, args.repeat)
    print(f"gangkeeper view at {args.gangs} gangs / {args.nodes} nodes (ms, best of "
          f"{args.repeat}):")
    for name, ms in figures.items():
        print(f"  {name:<40} {ms:9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["Config", "main", "measure", "run", "synthetic"]
