"""Load: 10,000 pods in 1,000 gangs of mixed kinds and sizes, created concurrently on a
1,000-node kwok fleet (`sandbox up --nodes 1000`), and what is left when it settles.

`python -m bench.load [--quick] [--nodes N] [--gangs G] [--json FILE]`

The gangs cycle through sizes 2, 4, 8, 16 and 20 (mean 10 pods) of one-GPU members
and through three kinds: bare pods with gangkeeper's annotations (60 %), Indexed Jobs
(30 %; the Job controller creates the pods) and JobSets (10 %; JobSet's controller,
then the Job controller). The fleet holds 8 GPUs a node, 0.8 GPU per pod asked for,
so about a fifth of the gangs cannot fit and must stay whole and gated. Everything is
created at once by 16 threads, in a seeded shuffled order, into one opted-in
namespace. Settled = every pod exists, every released pod is bound, no gang is partly
bound and the controller's planning would release nothing more (polled every 10 s);
the run also ends when nothing changed for 120 s and the controller finished two
planning passes meanwhile ("stalled": it looked and released nothing), or at a
deadline. A pass of 10,000 pods can take a minute on a loaded machine, and the
controller waits twice its last pass before the next, so 120 s of quiet alone is no
sign of a stall.

Figures (targets first): pods lost (expected members that never appeared), gangs
left gated that fit now (what the controller's own planning, `policies.release.ungate`,
would still release), gangs partly bound; then admission latency p50/p99 during the
burst (gangkeeper's own /mutate and /validate histograms, and the create call as the client saw it
for the bare pods), the controller's planning time per pass (mean, and the number of
passes), gangkeeper's CPU (cores, both processes, over the burst) and memory (RSS, peak:
`gangkeeper_*` the admission process, `controller_*` the controller's).
`--quick`: 40 nodes, 40 gangs (400 pods).

Pure part: `gang_mix`, `outcome`, `histogram_quantile`. Live part: starts and stops
its own sandbox in a temporary directory and creates objects only there.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cluster import RUN_FOR
from bench.memory import process_memory_mb
from bench.scheduling import percentile

NAMESPACE = "bench-load"
SIZES = (2, 4, 8, 16, 20)
#: (kind, share of the gangs), in the order the cycle draws them.
KINDS = (("pods", 6), ("job", 3), ("jobset", 1))
GPUS_PER_NODE = 8
#: GPUs on the fleet per pod asked for: some gangs cannot fit.
GPU_RATIO = 0.8
WORKERS = 16
POLL_SECONDS = 10.0
STALL_SECONDS = 120.0
#: Controller passes that must end within a quiet spell for it to count as a stall.
STALL_PASSES = 2
PLAN_COUNT = "gangkeeper_controller_plan_seconds_count"
GANG_LABEL = "gangkeeper.io/gang"
JOB_NAME_LABEL = "job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


@dataclass(frozen=True)
class GangSpec:
    kind: str
    name: str
    size: int


def gang_mix(gangs: int, seed: int = 14) -> list[GangSpec]:
    """`gangs` gangs, sizes and kinds cycling (mean size 10), in a seeded random order."""
    kinds = [kind for kind, share in KINDS for _ in range(share)]
    specs = [
        GangSpec(kinds[i % len(kinds)], f"load-{i:04d}", SIZES[i % len(SIZES)])
        for i in range(gangs)
    ]
    random.Random(seed).shuffle(specs)
    return specs


def histogram_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """Prometheus-style quantile (linear within a bucket) of cumulative (le, count)."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = q * ordered[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if bound == float("inf"):
                return lower_bound
            width = count - lower_count
            fraction = (rank - lower_count) / width if width else 0.0
            return lower_bound + (bound - lower_bound) * fraction
        lower_bound, lower_count = bound, count
    return ordered[-1][0]


def outcome(
    specs: Iterable[GangSpec], pods: Iterable[Mapping[str, Any]]
) -> dict[str, int]:
    """Counts over the settled pods: lost, partly bound, whole gangs bound or gated."""
    members: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        owner = labels.get(JOBSET_NAME_LABEL) or labels.get(JOB_NAME_LABEL) or labels.get(
            GANG_LABEL
        )
        if owner:
            members.setdefault(str(owner), []).append(pod)
    counts = {"gangs": 0, "pods_expected": 0, "pods_lost": 0, "gangs_partly_bound": 0,
              "gangs_bound": 0, "gangs_gated": 0}
    for spec in specs:
        found = members.get(spec.name, [])
        bound = sum(1 for p in found if (p.get("spec") or {}).get("nodeName"))
        counts["gangs"] += 1
        counts["pods_expected"] += spec.size
        counts["pods_lost"] += max(0, spec.size - len(found))
        if bound == spec.size:
            counts["gangs_bound"] += 1
        elif bound == 0:
            counts["gangs_gated"] += 1
        else:
            counts["gangs_partly_bound"] += 1
    return counts


# -- live ----------------------------------------------------------------------------------


def _template(run_for: str | None = None) -> dict[str, Any]:
    annotations = {RUN_FOR: run_for} if run_for else {}
    return {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "trainer", "image": "registry.invalid/bench/trainer:1",
                "resources": {"requests": {"nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}},
            }],
        },
    }


def _job_spec(size: int) -> dict[str, Any]:
    return {"completionMode": "Indexed", "completions": size, "parallelism": size,
            "backoffLimit": 0, "template": _template()}


def _objects(spec: GangSpec) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, body) to create for one gang."""
    ns = f"/namespaces/{NAMESPACE}"
    if spec.kind == "job":
        return [(f"/apis/batch/v1{ns}/jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": spec.name},
            "spec": _job_spec(spec.size)})]
    if spec.kind == "jobset":
        return [(f"/apis/jobset.x-k8s.io/v1alpha2{ns}/jobsets", {
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": spec.name},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1,
                                         "template": {"spec": _job_spec(spec.size)}}]}})]
    from gangkeeper.policies.names import GANG_NAME_ANNOTATION, MIN_MEMBER_ANNOTATION

    bodies = []
    for i in range(spec.size):
        pod = {"apiVersion": "v1", "kind": "Pod", **_template()}
        pod["metadata"] = {"name": f"{spec.name}-{i:02d}", "annotations": {
            GANG_NAME_ANNOTATION: spec.name, MIN_MEMBER_ANNOTATION: str(spec.size)}}
        bodies.append((f"/api/v1{ns}/pods", pod))
    return bodies


def _scrape(url: str, tls: Any) -> str:
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=30, context=tls) as answer:
        return str(answer.read().decode())


def _samples(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and " " in line:
            name, value = line.rsplit(" ", 1)
            try:
                found[name] = float(value)
            except ValueError:
                continue
    return found


def _buckets(samples: Mapping[str, float], endpoint: str) -> dict[float, float]:
    """Cumulative bucket counts of one endpoint, summed over verdicts: {le: count}."""
    buckets: dict[float, float] = {}
    for name, value in samples.items():
        if not name.startswith("gangkeeper_admission_duration_seconds_bucket{"):
            continue
        labels = dict(
            part.split("=", 1) for part in name[name.index("{") + 1:-1].split(",")
        )
        if labels.get("endpoint", "").strip('"') != endpoint:
            continue
        bound = labels["le"].strip('"')
        le = float("inf") if bound == "+Inf" else float(bound)
        buckets[le] = buckets.get(le, 0.0) + value
    return buckets


def _plan_count(url: str, tls: Any) -> float:
    """The controller's planning passes so far; 0 when /metrics does not answer (the
    caller keeps the last count it saw)."""
    try:
        return _samples(_scrape(url, tls)).get(PLAN_COUNT, 0.0)
    except OSError:
        return 0.0


def _cpu_seconds(pid: int) -> float:
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Burst:
    """Creates every object at once (16 threads), timing the pod creates."""

    def __init__(self, rest: Any) -> None:
        self.rest = rest
        self.create_ms: list[float] = []
        self.failures: list[str] = []

    def create(self, path: str, body: dict[str, Any]) -> None:
        from gangkeeper.webhook.kube.api import ApiError

        for attempt in range(5):
            t0 = time.perf_counter()
            try:
                self.rest.request("POST", path, body=body)
            except ApiError as err:
                if err.status in (429, 500, 503, 504, 0) and attempt < 4:
                    time.sleep(0.5 * (attempt + 1))  # transient: retry as a controller would
                    continue
                if err.status == 409 and attempt > 0:
                    return  # the timed-out attempt was stored after all: created
                self.failures.append(f"{body['metadata']['name']}: {err}")
                return
            if body["kind"] == "Pod":
                self.create_ms.append((time.perf_counter() - t0) * 1000)
            return

    def run(self, specs: Sequence[GangSpec]) -> None:
        work = [obj for spec in specs for obj in _objects(spec)]
        random.Random(7).shuffle(work)
        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(lambda item: self.create(*item), work))


def _listed(rest: Any, path: str, log: Any) -> list[Mapping[str, Any]]:
    """Every object of a list; a list the loaded API server times out (504, "too large
    resource version" while its watch cache lags) is tried again."""
    from gangkeeper.webhook.kube.api import ApiError
    from gangkeeper.webhook.kube.informer import list_all

    for _ in range(30):
        try:
            return list_all(rest, path)
        except ApiError as err:
            log(f"listing {path}: {err}; again in {POLL_SECONDS:.0f} s")
            time.sleep(POLL_SECONDS)
    return list_all(rest, path)


def stalled(quiet_seconds: float, passes_meanwhile: float) -> bool:
    """Nothing changed for STALL_SECONDS while the controller planned STALL_PASSES times."""
    return quiet_seconds >= STALL_SECONDS and passes_meanwhile >= STALL_PASSES


def _settle(
    rest: Any, specs: Sequence[GangSpec], log: Any, passes: Any = lambda: 0.0
) -> tuple[list[Mapping[str, Any]], str]:
    """Poll (every POLL_SECONDS: listing 10,000 pods loads the API server too) until
    the load has settled: every pod exists, every released pod is bound, no gang is
    partly bound, and the controller's own planning would release nothing more. Or
    until `stalled` (`passes()`: the controller's passes so far), or the deadline.
    The pods then, and which."""
    from gangkeeper.policies.release.ungate import ungate_plan
    from gangkeeper.policies.settings.config import load_config

    expected = sum(s.size for s in specs)
    last: tuple[int, int, int] | None = None
    known = [0.0]

    def counted() -> float:  # the count never goes back: a failed scrape keeps the last
        known[0] = max(known[0], float(passes()))
        return known[0]

    stable_since, passes_then = time.monotonic(), counted()
    deadline = time.monotonic() + max(300.0, min(2400.0, expected * 0.24))
    while True:
        pods = _listed(rest, f"/api/v1/namespaces/{NAMESPACE}/pods", log)
        nodes = _listed(rest, "/api/v1/nodes", log)
        gated = sum(1 for p in pods if p["spec"].get("schedulingGates"))
        bound = sum(1 for p in pods if p["spec"].get("nodeName"))
        changed = (len(pods), gated, bound) != last
        if changed:
            last, stable_since = (len(pods), gated, bound), time.monotonic()
            passes_then = counted()
            log(f"pods {len(pods)}/{expected}, gated {gated}, bound {bound} "
                f"(controller passes: {passes_then:.0f})")
        # Judged once per state: the planning below costs as much as the controller's
        # (a minute for 10,000 pods on a loaded machine) and shares its two cores.
        if changed and len(pods) >= expected and len(pods) - gated == bound:
            counts = outcome(specs, pods)
            fits = ungate_plan(pods, nodes, load_config({}),
                               time.time(), namespace=NAMESPACE).releases
            if not counts["gangs_partly_bound"] and not fits:
                return pods, "settled"
        quiet, planned = time.monotonic() - stable_since, counted() - passes_then
        if stalled(quiet, planned):
            return pods, f"stalled ({quiet:.0f} s without a change, {planned:.0f} passes)"
        if time.monotonic() > deadline:
            return pods, "deadline"
        time.sleep(POLL_SECONDS)


def _wait_namespace(rest: Any) -> None:
    from gangkeeper.webhook.kube.api import ApiError

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            rest.get(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
            return
        except ApiError:
            time.sleep(0.5)


def _figures(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, Any]:
    """Admission quantiles and planning time over the burst, from two scrapes."""
    figures: dict[str, Any] = {}
    for endpoint in ("mutate", "validate"):
        old, new = _buckets(before, endpoint), _buckets(after, endpoint)
        burst = [(le, new[le] - old.get(le, 0.0)) for le in new]
        for name, q in (("p50", 0.5), ("p99", 0.99)):
            value = histogram_quantile(burst, q)
            figures[f"{endpoint}_{name}_ms"] = None if value is None else round(value * 1000, 2)
    passes = after.get(PLAN_COUNT, 0.0) - before.get(PLAN_COUNT, 0.0)
    key = "gangkeeper_controller_plan_seconds"
    plan_s = after.get(f"{key}_sum", 0.0) - before.get(f"{key}_sum", 0.0)
    return {
        **figures,
        "plan_passes": int(passes),
        "plan_ms_per_pass": round(1000 * plan_s / passes, 1) if passes else None,
    }


def measure(nodes: int, gangs: int, log: Any = print) -> dict[str, Any]:
    import ssl

    from gangkeeper.policies.release.ungate import ungate_plan
    from gangkeeper.policies.settings.config import load_config
    from gangkeeper.webhook.kube.client import api_client
    from gangkeeper.webhook.kube.rest import Rest
    from gangkeeper.webhook.sandbox import Sandbox
    from gangkeeper.webhook.sandbox.sandbox import CONTROLLER_PROCESS

    specs = gang_mix(gangs)
    with tempfile.TemporaryDirectory(prefix="gangkeeper-load-") as directory:
        sandbox = Sandbox(Path(directory))
        try:
            started = time.monotonic()
            info = sandbox.up(fleet=None, node_count=nodes, timeout=1800,
                              components=("kwok", "jobset"))
            log(f"sandbox of {nodes} nodes up in {time.monotonic() - started:.0f}s")
            sandbox.kubectl("create", "namespace", NAMESPACE)
            sandbox.kubectl("label", "namespace", NAMESPACE, "gangkeeper.io/enabled=true")
            client = api_client(str(info.kubeconfig))
            client.configuration.connection_pool_maxsize = WORKERS + 4
            rest = Rest(client)
            _wait_namespace(rest)
            # Admission and the controller are two processes (the default): admission's
            # figures from the one, planning's from the other, CPU and memory of each.
            record = sandbox.processes.record("gangkeeper")
            control = sandbox.processes.record(CONTROLLER_PROCESS) or record
            assert record is not None and control is not None and info.gangkeeper_url
            control_url = info.controller_url or info.gangkeeper_url
            tls = ssl.create_default_context(cafile=str(sandbox.gangkeeper_cert_dir / "ca.crt"))

            def scrape() -> dict[str, float]:
                assert info.gangkeeper_url
                return {**_samples(_scrape(control_url, tls)),
                        **_samples(_scrape(info.gangkeeper_url, tls))}

            pids = sorted({record.pid, control.pid})
            before = scrape()
            cpu_before, burst_started = sum(map(_cpu_seconds, pids)), time.monotonic()
            burst = _Burst(rest)
            burst.run(specs)
            created_s = time.monotonic() - burst_started
            log(f"created in {created_s:.0f}s ({len(burst.failures)} failed)")
            pods, how = _settle(rest, specs, log, lambda: _plan_count(control_url, tls))
            settled_s = time.monotonic() - burst_started
            cpu = (sum(map(_cpu_seconds, pids)) - cpu_before) / settled_s
            rss, peak = process_memory_mb(record.pid)
            control_rss, control_peak = process_memory_mb(control.pid)
            after = scrape()
            left = ungate_plan(pods, _listed(rest, "/api/v1/nodes", log), load_config({}),
                               time.time(), namespace=NAMESPACE)
            rest.close_all()
            return {
                "nodes": nodes,
                "gpus": nodes * GPUS_PER_NODE,
                **outcome(specs, pods),
                "gangs_left_gated_that_fit": len(left.releases),
                "create_failures": len(burst.failures),
                "created_s": round(created_s, 1),
                "settled_s": round(settled_s, 1),
                "end": how,
                **_figures(before, after),
                "create_p50_ms": round(percentile(burst.create_ms, 50), 1)
                if burst.create_ms else None,
                "create_p99_ms": round(percentile(burst.create_ms, 99), 1)
                if burst.create_ms else None,
                "gangkeeper_cpu_cores": round(cpu, 2),
                "gangkeeper_rss_mb": round(rss, 1),
                "gangkeeper_peak_mb": round(peak, 1),
                "controller_rss_mb": round(control_rss, 1),
                "controller_peak_mb": round(control_peak, 1),
                "failures_sample": burst.failures[:3],
            }
        finally:
            sandbox.down()


def run(quick: bool, nodes: int | None = None, gangs: int | None = None) -> list[dict[str, Any]]:
    gangs = gangs or (40 if quick else 1000)
    pods = sum(s.size for s in gang_mix(gangs))
    nodes = nodes or max(1, round(pods * GPU_RATIO / GPUS_PER_NODE))
    return [measure(nodes, gangs, log=lambda m: print(f"[load] {m}", file=sys.stderr,
                                                        flush=True))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="40 gangs (400 pods), 40 nodes")
    parser.add_argument("--nodes", type=int, help="fleet size (default: 0.8 GPU per pod)")
    parser.add_argument("--gangs", type=int, help="gangs to create (default 1000)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = run(args.quick, args.nodes, args.gangs)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    from bench.report import print_rows

    print_rows("load", [{k: v for k, v in r.items() if k != "failures_sample"} for r in rows])
    return 0 if all(r["pods_lost"] == 0 and r["gangs_partly_bound"] == 0
                    and r["gangs_left_gated_that_fit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
