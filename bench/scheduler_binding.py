"""`python -m bench.scheduler_binding [--quick]`: how fast kube-scheduler binds a released gang.

Once gangkeeper lifts a gang's gates, the gang is kube-scheduler's: every member is one
scheduling cycle and one binding request. Two things bound that time, and this
measures both on the sandbox's real kube-scheduler (kwok nodes, nothing else running:
no gangkeeper, no neighbour):

- the scheduler's client rate limit (`clientConnection.qps` / `burst`): its defaults,
  50 requests/s with a burst of 100, against a raised 500 / 1,000;
- how the release pins a member to its node: the hostname label in `nodeSelector`
  (gangkeeper's pin before; every node is filtered: only one passes), against required
  node affinity `matchFields: metadata.name In [node]` (gangkeeper's pin now,
  `assigner.pin`), which the NodeAffinity plugin turns into
  `PreFilterResult.NodeNames`, so filtering runs on that node alone.

Each trial creates `pods` one-GPU pods held by gangkeeper's gate, pinned one per node
(spread over the fleet) in the trial's style, then lifts every gate from 32 connections
(as the controller does) and times, from one raw watch started before the lift, the
first and the last pod bound. Pods are created pinned and gated; only the gate is
lifted (the scheduler's work is the same as after gangkeeper's own patch, which adds
the pin as it lifts the gate). Baseline: the default client with the hostname pin, the
state of a cluster that set nothing before gangkeeper pinned with matchFields, in the
same run.

`run(quick)` returns one row per (nodes, client, pin) for `python -m bench`. Starts and
stops its own sandboxes (one per client setting and size) in temporary directories.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gangkeeper.policies.names import GATE, PIN_LABEL

NAMESPACE = "bench-binding"
GPUS_PER_NODE = 8
WORKERS = 32
#: (name, qps, burst); None: the scheduler's own defaults (50, 100).
CLIENTS: tuple[tuple[str, float | None, int | None], ...] = (
    ("default 50/100", None, None),
    ("raised 500/1000", 500.0, 1000),
)
PINS = ("hostname", "matchFields")
SIZES = ((1000, 1000), (5000, 1000))  # (nodes, pods)
QUICK_SIZES = ((200, 200),)


def _log(message: str) -> None:
    print(f"[bench.scheduler_binding {time.strftime('%H:%M:%S')}] {message}",
          file=sys.stderr, flush=True)


def pinned_pod(index: int, node: str, pin: str) -> dict[str, Any]:
    """A gated one-GPU pod pinned to `node` the way `pin` names it."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "schedulingGates": [{"name": GATE}],
        "containers": [{
            "name": "trainer",
            "image": "registry.invalid/bench/trainer:1",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        }],
    }
    if pin == "hostname":
        spec["nodeSelector"] = {PIN_LABEL: node}
    else:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]},
            ]}],
        }}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"member-{index:05d}"}, "spec": spec}


class BindWatch:
    """One raw watch of the namespace: when each pod was first seen bound."""

    def __init__(self, rest: Any, path: str, since: str) -> None:
        self.rest, self.path, self.version = rest, path, since
        self.bound: dict[str, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for event in self.rest.watch(self.path, [("resourceVersion", self.version)], 30):
                obj = event.get("object") or {}
                meta = obj.get("metadata") or {}
                self.version = str(meta.get("resourceVersion") or self.version)
                if (obj.get("spec") or {}).get("nodeName"):
                    self.bound.setdefault(str(meta.get("name")), time.monotonic())
                if self.stop.is_set():
                    return


def trial(rest: Any, nodes: list[str], pods: int, pin: str) -> dict[str, float]:
    """Create `pods` gated pinned pods, lift their gates at once, time their binding."""
    from gangkeeper.webhook.controller.writes import gate_removal_patch

    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    stride = max(1, len(nodes) // pods)
    targets = [nodes[(i * stride) % len(nodes)] for i in range(pods)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: rest.request("POST", path, body=pinned_pod(i, targets[i], pin)),
                      range(pods)))
    since = str(rest.get(path, [("limit", 1)])["metadata"]["resourceVersion"])
    watch = BindWatch(rest, path, since)
    patch = gate_removal_patch([GATE], GATE)

    def lift(index: int) -> None:
        rest.request("PATCH", f"{path}/member-{index:05d}", body=patch,
                     content_type="application/json-patch+json")

    with ThreadPoolExecutor(WORKERS) as pool:
        started = time.monotonic()
        list(pool.map(lift, range(pods)))
        lifted = time.monotonic() - started
    deadline = time.monotonic() + 600
    while len(watch.bound) < pods and time.monotonic() < deadline:
        time.sleep(0.05)
    watch.stop.set()
    if len(watch.bound) < pods:
        raise RuntimeError(f"{pin}: {len(watch.bound)} of {pods} bound after 600 s")
    wrong = [p for p in rest.get(path)["items"]
             if p["spec"].get("nodeName") != targets[int(p["metadata"]["name"][7:])]]
    if wrong:
        raise RuntimeError(f"{pin}: {len(wrong)} pods bound to another node than their pin")
    rest.request("DELETE", path, [("gracePeriodSeconds", "0")])
    while rest.get(path, [("limit", 1)])["items"]:
        time.sleep(0.5)
    return {
        "gates_lifted_s": round(lifted, 2),
        "first_bound_s": round(min(watch.bound.values()) - started, 2),
        "all_bound_s": round(max(watch.bound.values()) - started, 2),
    }


def measure(nodes: int, pods: int, client: tuple[str, float | None, int | None]
            ) -> list[dict[str, Any]]:
    from bench.cluster import api_client
    from gangkeeper.webhook.kube.rest import Rest
    from gangkeeper.webhook.sandbox import Sandbox, SchedulerClient

    name, qps, burst = client
    limit = SchedulerClient(qps, burst) if qps is not None and burst is not None else None
    rows = []
    with tempfile.TemporaryDirectory(prefix="gk-bench-binding-") as directory:
        sandbox = Sandbox(Path(directory), scheduler_client=limit)
        try:
            info = sandbox.up(fleet=None, node_count=nodes, gangkeeper=False,
                              components=("kwok",), timeout=900)
            rest = Rest(api_client(info.kubeconfig, pool=WORKERS))
            rest.request("POST", "/api/v1/namespaces",
                         body={"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": NAMESPACE}})
            for pin in PINS:
                _log(f"{nodes} nodes, {pods} pods, client {name}, pin {pin}")
                row = {"nodes": nodes, "pods": pods, "client": name, "pin": pin,
                       **trial(rest, list(info.nodes), pods, pin)}
                _log(json.dumps(row))
                rows.append(row)
        finally:
            sandbox.down()
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for nodes, pods in QUICK_SIZES if quick else SIZES:
        size_rows = [r for client in CLIENTS for r in measure(nodes, pods, client)]
        base = next(r for r in size_rows if r["client"] == CLIENTS[0][0] and r["pin"] == PINS[0])
        for row in size_rows:
            row["vs_default"] = round(row["all_bound_s"] / max(base["all_bound_s"], 1e-3), 2)
        rows.extend(size_rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler_binding",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK_SIZES}")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    print("| nodes | pods | scheduler client | pin | gates lifted | bound (first / all) "
          "| vs default |")
    print("| ---: | ---: | --- | --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['nodes']:,} | {r['pods']:,} | {r['client']} | {r['pin']} "
              f"| {r['gates_lifted_s']:.2f} s | {r['first_bound_s']:.2f} / "
              f"{r['all_bound_s']:.2f} s | {r['vs_default']:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
