"""`python -m bench.controller [--quick]`: from a gang's last member to all members bound.

For gangs of 8, 64 and 1,000 one-GPU pods (8 and 64 with --quick) on a sandbox control
plane, with gangkeeper's controller running inside `gangkeeper serve`: create every
member but the last (all stay gated: minMember is the gang size), then the last one,
and time from the moment its create call returned until
- the first and the last gangkeeper gate is lifted (the controller's own work; target
  for 1,000 pods: within 2 s),
- the first and the last member is bound (adds kube-scheduler, whose client is rate
  limited to its default 50 requests/s for bindings).
Times come from one raw watch of the namespace started before the gang
(`bench.pod_watch`), so each is the moment this process saw the change (a few
milliseconds after the API server did).

Baseline, measured in the same run after each gang: the API server alone lifting as
many gates (`api_ceiling`: the same patch, the same 32 connections, a minimal client,
nothing else acting). On a small machine the API server's own cost per write bounds
the release; "all vs alone" says how close the controller comes to that bound.

`run(quick) -> list[dict]` (what `python -m bench` calls) starts its own sandbox via
bench.cluster.open_cluster. May touch that sandbox only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.pod_watch import Observer
from gangkeeper.policies.names import GANG_NAME_ANNOTATION, MIN_MEMBER_ANNOTATION

NAMESPACE = "bench-controller"
BASELINE_NAMESPACE = "bench-controller-baseline"
BASELINE_GATE = "bench.gangkeeper.io/baseline"
HOLD_GATE = "bench.gangkeeper.io/hold"
POOL_KEY = "bench.gangkeeper.io/pool"
POOL = "controller"
GPUS_PER_NODE = 100
SIZES = (8, 64, 1000)
QUICK_SIZES = (8, 64)


def _log(message: str) -> None:
    print(f"[bench.controller {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
          flush=True)


def member(gang: str, index: int, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{gang}-{index:04d}",
            "annotations": {GANG_NAME_ANNOTATION: gang, MIN_MEMBER_ANNOTATION: str(size)},
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {POOL_KEY: POOL},
            "containers": [{
                "name": "trainer",
                "image": "registry.invalid/bench/trainer:1",
                "resources": {"limits": {"nvidia.com/gpu": "1"}},
            }],
        },
    }


def create(rest: Any, path: str, body: dict[str, Any], attempts: int = 5) -> None:
    """Create a pod; an overloaded webhook (HTTP 500) is retried, 409 means done."""
    from gangkeeper.webhook.kube.api import ApiError

    for attempt in range(attempts):
        try:
            rest.request("POST", path, body=body)
            return
        except ApiError as err:
            if err.status == 409:
                return
            if err.status < 500 or attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))


def held_pod(index: int) -> dict[str, Any]:
    """A pod held by two gates of the baseline's own: it never schedules, nothing acts."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"held-{index:04d}"},
        "spec": {
            "schedulingGates": [{"name": BASELINE_GATE}, {"name": HOLD_GATE}],
            "containers": [{"name": "c", "image": "registry.invalid/bench/idle:1"}],
        },
    }


def api_ceiling(cluster: Any, size: int) -> float:
    """Seconds the API server takes for `size` gate removals with nothing else to do.

    The same JSON patch the controller sends (`gate_removal_patch`: test the gate list,
    replace it without the one gate),
    from the same number of concurrent connections, by a minimal client, on pods in a
    namespace gangkeeper does not watch for gangs; the pods keep a second gate, so the
    scheduler never acts on them. This is the fastest gangkeeper's burst could be on
    this API server and this machine, measured in the same run.
    """
    from gangkeeper.webhook.controller.controller import PATCH_WORKERS
    from gangkeeper.webhook.controller.writes import gate_removal_patch

    path = f"/api/v1/namespaces/{BASELINE_NAMESPACE}/pods"
    raw = cluster.raw
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: raw.create(path, held_pod(i)), range(size)))
    patch = json.dumps(gate_removal_patch([BASELINE_GATE, HOLD_GATE], BASELINE_GATE)).encode()

    def ungate(index: int) -> None:
        status, body = raw.request(
            "PATCH", f"{path}/held-{index:04d}", patch,
            content_type="application/json-patch+json",
        )
        if status != 200:
            raise RuntimeError(f"baseline patch: HTTP {status} {body[:200]!r}")

    with ThreadPoolExecutor(PATCH_WORKERS) as pool:
        # Open every connection first, so the clock times patches only.
        list(pool.map(lambda _i: raw.request("GET", "/version"), range(PATCH_WORKERS)))
        started = time.monotonic()
        list(pool.map(ungate, range(size)))
        elapsed = time.monotonic() - started
    cluster.clear_pods(BASELINE_NAMESPACE, timeout=600)
    return elapsed


def measure(cluster: Any, rest: Any, size: int) -> dict[str, Any]:
    gang = f"g{size}"
    since = str(rest.get(f"/api/v1/namespaces/{NAMESPACE}/pods", [("limit", 1)])
                ["metadata"]["resourceVersion"])
    observer = Observer(rest, since, NAMESPACE)
    observer.thread.start()
    started = time.monotonic()
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda i: create(rest, path, member(gang, i, size)), range(size - 1)))

    created_rest = time.monotonic() - started
    if observer.ungated:
        raise RuntimeError(f"gang {gang} released before its last member existed")
    create(rest, path, member(gang, size - 1, size))
    last = time.monotonic()
    deadline = last + 600
    while len(observer.bound) < size and time.monotonic() < deadline:
        time.sleep(0.05)
    observer.stop.set()
    if len(observer.ungated) < size or len(observer.bound) < size:
        raise RuntimeError(
            f"gang of {size}: {len(observer.ungated)} ungated, {len(observer.bound)} bound "
            "after 600 s"
        )
    row = {
        "gang_size": size,
        "create_first_members_s": round(created_rest, 2),
        "first_gate_lifted_s": round(min(observer.ungated.values()) - last, 3),
        "all_gates_lifted_s": round(max(observer.ungated.values()) - last, 3),
        "first_bound_s": round(min(observer.bound.values()) - last, 3),
        "all_bound_s": round(max(observer.bound.values()) - last, 3),
        "target_met": max(observer.ungated.values()) - last <= 2.0,
    }
    row["api_ceiling_s"] = round(api_ceiling(cluster, size), 3)
    row["vs_ceiling"] = round(row["all_gates_lifted_s"] / max(row["api_ceiling_s"], 1e-3), 2)
    _log(json.dumps(row))
    cluster.clear_pods(NAMESPACE, timeout=600)
    return row


def run(quick: bool = False) -> list[dict[str, Any]]:
    from bench.cluster import create_namespace, open_cluster
    from gangkeeper.webhook.kube.rest import Rest

    sizes = QUICK_SIZES if quick else SIZES
    rows: list[dict[str, Any]] = []
    with open_cluster(quick=quick, log=_log) as cluster:
        create_namespace(cluster.core, NAMESPACE, opted_in=True)
        create_namespace(cluster.core, BASELINE_NAMESPACE, opted_in=False)
        nodes = -(-max(sizes) // GPUS_PER_NODE)
        cluster.ensure_fleet(POOL, nodes, GPUS_PER_NODE, label=POOL_KEY)
        rest = Rest(cluster.api)
        for size in sizes:
            _log(f"gang of {size}")
            rows.append(measure(cluster, rest, size))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.controller", description=__doc__)
    parser.add_argument("--quick", action="store_true", help=f"gangs of {QUICK_SIZES} only")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=2)
    print("| gang | gates lifted (first / all) | API server alone | all vs alone "
          "| bound (first / all) | ≤ 2 s |")
    print("| ---: | ---: | ---: | ---: | ---: | :---: |")
    for r in rows:
        print(f"| {r['gang_size']} | {r['first_gate_lifted_s']:.2f} / {r['all_gates_lifted_s']:.2f}"
              f" s | {r['api_ceiling_s']:.2f} s | {r['vs_ceiling']:.2f}x"
              f" | {r['first_bound_s']:.2f} / {r['all_bound_s']:.2f} s |"
              f" {'yes' if r['target_met'] else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
