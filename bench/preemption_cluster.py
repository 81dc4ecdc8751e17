"""`python -m bench.preemption_cluster [--quick] [-o json]`: whole-gang preemption on a
sandbox, gangkeeper's `gate` backend and Kubernetes' own (`native`) in the same run.

`bench.preemption` measures the planner alone on a simulated cluster; this one runs the
same kind of trace through the real API server, Job controller, kube-scheduler and
kwok, so its times are wall-clock times a user would see. For each backend, in a
namespace of its own on a fleet of its own (N nodes of 8 GPUs; N = 4 quick, else 8):

1. the fleet is filled with N low-priority (100) Indexed Jobs of 2 x 4 GPUs, `backoffLimit:
   0` as a user leaves it, each bound whole;
2. high-priority (1000) Jobs of 2 x 8 GPUs arrive one at a time (2 quick, else 4), each
   running 6 s; the next arrives once the last one completed and the fleet is full again
   (the requeued low Jobs bound again; a low Job that failed is submitted again, as its
   user would).

Figures per backend:
- `bound_s_p50` / `bound_s_p99`: a high Job's creation to both its pods bound;
- `preempted_over_needed` (mean, max): GPUs of the pods preempted against the least a
  whole-Job victim set could free for it (every choice of 2 nodes emptied, each low Job
  on them taken whole: exact for this fleet);
- `lost_gpu_s`: GPU-seconds the victims had run when they went;
- `partly_bound`: Jobs seen with pods bound and others released but unbound for over a
  second (target 0);
- `victim_jobs`: low Jobs that lost pods to a high one, counted per arrival;
- `victim_jobs_failed`: those whose Job then failed (`Failed` condition);
- `all_bound`: every high Job was bound whole within the wait (60 s).

May touch: the sandbox `bench.cluster` starts (or is given), its namespaces
`bench-preempt-*`, two PriorityClasses `bench-preempt-*`, the Nodes it creates. Nothing else.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.cluster import POOL_LABEL, RUN_FOR, BenchCluster, open_cluster, wait_for
from gangkeeper.policies.names import GATE

GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
LOW, HIGH = 100, 1000
CLASSES = {"bench-preempt-low": LOW, "bench-preempt-high": HIGH}
#: backend → namespace (bench.cluster routes the native one to the native backend).
NAMESPACES = {"gate": "bench-preempt-gate", "native": "bench-preempt-native"}
JOB_LABEL = "batch.kubernetes.io/job-name"
HIGH_MEMBERS = 2
BOUND_WAIT = 60.0


def job(name: str, pool: str, workers: int, gpus: int, klass: str, *,
        run_for: str | None = None) -> dict[str, Any]:
    """An Indexed Job of `workers` pods of `gpus` GPUs on the pool, in PriorityClass `klass`."""
    annotations = {RUN_FOR: run_for} if run_for else {}
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed", "completions": workers, "parallelism": workers,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never", "priorityClassName": klass,
                    "nodeSelector": {POOL_LABEL: pool},
                    "containers": [{
                        "name": "trainer", "image": "registry.invalid/bench/trainer:1",
                        "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                    }],
                },
            },
        },
    }


@dataclass(frozen=True)
class Seen:
    """One live pod as sampled: its Job, node, GPUs and start time."""

    uid: str
    job: str
    node: str
    gpus: int
    gated: bool
    started: float | None


def _seconds(stamp: Any) -> float | None:
    if stamp is None:
        return None
    return stamp.timestamp() if isinstance(stamp, datetime) else None


def sample(cluster: BenchCluster, namespace: str) -> dict[str, Seen]:
    """Every live pod of the namespace, by uid."""
    pods = cluster.core.list_namespaced_pod(namespace).items
    out: dict[str, Seen] = {}
    for p in pods:
        if p.metadata.deletion_timestamp or p.status.phase in ("Succeeded", "Failed"):
            continue
        limits = p.spec.containers[0].resources.limits or {}
        out[p.metadata.uid] = Seen(
            uid=p.metadata.uid, job=(p.metadata.labels or {}).get(JOB_LABEL, ""),
            node=p.spec.node_name or "", gpus=int(limits.get(GPU, "0")),
            gated=any(g.name == GATE for g in p.spec.scheduling_gates or ()),
            started=_seconds(p.status.start_time),
        )
    return out


def least_to_free(pods: Mapping[str, Seen], nodes: list[str], members: int) -> int:
    """The fewest GPUs of whole low Jobs whose going leaves `members` nodes empty."""
    by_job: dict[str, list[Seen]] = {}
    for pod in pods.values():
        if pod.node:
            by_job.setdefault(pod.job, []).append(pod)
    best: int | None = None
    for chosen in itertools.combinations(nodes, members):
        taken = {job for job, ps in by_job.items() if any(p.node in chosen for p in ps)}
        gpus = sum(p.gpus for job in taken for p in by_job[job])
        best = gpus if best is None else min(best, gpus)
    return best or 0


@dataclass
class Tally:
    bound_s: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    lost_gpu_s: float = 0.0
    partly: set[str] = field(default_factory=set)
    victim_jobs: int = 0
    victims_failed: int = 0
    all_bound: bool = True


def describe(cluster: BenchCluster, namespace: str) -> str:
    """Each Job's pods as `job: node|gated|pending ...`, for a message that says where
    a run got stuck."""
    by_job: dict[str, list[str]] = {}
    for p in sample(cluster, namespace).values():
        by_job.setdefault(p.job, []).append(p.node or ("gated" if p.gated else "pending"))
    return "; ".join(f"{job}: {' '.join(sorted(where))}" for job, where in sorted(by_job.items()))


def _failed_jobs(cluster: BenchCluster, namespace: str) -> set[str]:
    jobs = cluster.batch.list_namespaced_job(namespace).items
    return {j.metadata.name for j in jobs
            if any(c.type == "Failed" and c.status == "True" for c in j.status.conditions or ())}


def _complete(cluster: BenchCluster, namespace: str, name: str) -> bool:
    status = cluster.batch.read_namespaced_job(name, namespace).status
    return any(c.type == "Complete" and c.status == "True" for c in status.conditions or ())


class Lows:
    """The low Jobs that fill the fleet, and their resubmission when one failed."""

    def __init__(self, cluster: BenchCluster, namespace: str, pool: str, count: int) -> None:
        self.cluster, self.namespace, self.pool = cluster, namespace, pool
        self.names = [f"low-{i}" for i in range(count)]
        self._next = count

    def create_all(self) -> None:
        for name in self.names:
            self._create(name)

    def _create(self, name: str) -> None:
        self.cluster.batch.create_namespaced_job(
            self.namespace, job(name, self.pool, 2, 4, "bench-preempt-low"))

    def resubmit_failed(self) -> set[str]:
        """Each failed low Job deleted and submitted again under a new name."""
        failed = _failed_jobs(self.cluster, self.namespace) & set(self.names)
        for name in failed:
            self.cluster.batch.delete_namespaced_job(
                name, self.namespace, propagation_policy="Background")
            self.names.remove(name)
            fresh = f"low-{self._next}"
            self._next += 1
            self.names.append(fresh)
            self._create(fresh)
        return failed

    def all_bound(self) -> bool:
        pods = sample(self.cluster, self.namespace).values()
        return all(
            sum(1 for p in pods if p.job == name and p.node) == 2 for name in self.names)


def arrival(cluster: BenchCluster, namespace: str, pool: str, nodes: list[str], *,
            index: int, tally: Tally) -> None:
    """One high Job: created, watched until bound whole, figures added to `tally`."""
    before = sample(cluster, namespace)
    needed = least_to_free(before, nodes, HIGH_MEMBERS)
    name = f"high-{index}"
    failed_before = _failed_jobs(cluster, namespace)
    started = time.monotonic()
    cluster.batch.create_namespaced_job(
        namespace, job(name, pool, HIGH_MEMBERS, GPUS_PER_NODE, "bench-preempt-high", run_for="6s"))
    gone: dict[str, float] = {}
    loose_since: dict[str, float] = {}
    bound_at: float | None = None
    while time.monotonic() - started < BOUND_WAIT:
        now_wall, now = time.time(), time.monotonic()
        pods = sample(cluster, namespace)
        for uid, pod in before.items():
            if uid not in pods and pod.node and uid not in gone:
                gone[uid] = now_wall
        for job_name in {p.job for p in pods.values()}:
            mine = [p for p in pods.values() if p.job == job_name]
            if any(p.node for p in mine) and any(not p.node and not p.gated for p in mine):
                if now - loose_since.setdefault(job_name, now) > 1.0:
                    tally.partly.add(job_name)
            else:
                loose_since.pop(job_name, None)
        if sum(1 for p in pods.values() if p.job == name and p.node) == HIGH_MEMBERS:
            bound_at = now
            break
        time.sleep(0.2)
    if bound_at is None:
        tally.all_bound = False
        return
    tally.bound_s.append(bound_at - started)
    victims = [before[uid] for uid in gone]
    preempted = sum(p.gpus for p in victims)
    if needed:
        tally.ratios.append(preempted / needed)
    tally.lost_gpu_s += sum(p.gpus * max(0.0, gone[p.uid] - (p.started or gone[p.uid]))
                            for p in victims)
    victim_jobs = {p.job for p in victims}
    tally.victim_jobs += len(victim_jobs)
    wait_for(lambda: _complete(cluster, namespace, name), 60, f"{name} complete", 0.5)
    tally.victims_failed += len((_failed_jobs(cluster, namespace) - failed_before) & victim_jobs)


def trial(cluster: BenchCluster, backend: str, nodes_count: int, arrivals: int
          ) -> dict[str, Any]:
    namespace = NAMESPACES[backend]
    pool = f"preempt-{backend}"
    nodes = cluster.ensure_fleet(pool, nodes_count, GPUS_PER_NODE, label=POOL_LABEL)
    cluster.wait_nodes_free(nodes)
    # Jobs of 2 x 4 GPUs: one per node fills the fleet.
    lows = Lows(cluster, namespace, pool, nodes_count)
    lows.create_all()
    tally = Tally()
    for index in range(arrivals):
        try:
            wait_for(lows.all_bound, 120, f"the low Jobs of {namespace} bound whole", 0.5)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: {describe(cluster, namespace)}") from None
        arrival(cluster, namespace, pool, nodes, index=index, tally=tally)
        if not tally.all_bound:
            break
        # The requeued ones come back by themselves; a failed one only if resubmitted.
        lows.resubmit_failed()
    cluster.clear_pods(namespace)
    bound = sorted(tally.bound_s)
    return {
        "backend": backend, "nodes": nodes_count, "gpus": nodes_count * GPUS_PER_NODE,
        "arrivals": arrivals,
        "bound_s_p50": round(statistics.median(bound), 2) if bound else None,
        "bound_s_p99": round(bound[min(len(bound) - 1, int(0.99 * len(bound)))], 2)
        if bound else None,
        "preempted_over_needed": round(statistics.mean(tally.ratios), 3) if tally.ratios
        else None,
        "preempted_over_needed_max": round(max(tally.ratios), 3) if tally.ratios else None,
        "lost_gpu_s": round(tally.lost_gpu_s),
        "partly_bound": len(tally.partly),
        "victim_jobs": tally.victim_jobs,
        "victim_jobs_failed": tally.victims_failed,
        "all_bound": tally.all_bound,
    }


def _priority_classes(cluster: BenchCluster) -> None:
    from kubernetes import client

    api: Any = client.SchedulingV1Api(cluster.api)
    for name, value in CLASSES.items():
        try:
            api.create_priority_class({
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value,
                "preemptionPolicy": "PreemptLowerPriority"})
        except client.ApiException as exc:
            if exc.status != 409:  # made by an earlier run on this sandbox
                raise


def run(quick: bool, cluster: BenchCluster | None = None) -> list[dict[str, Any]]:
    """Both backends on a sandbox (started here unless given)."""
    if cluster is None:
        with open_cluster(quick=quick) as own:
            return run(quick, own)
    _priority_classes(cluster)
    nodes, arrivals = (4, 2) if quick else (8, 4)
    rows = []
    for backend in NAMESPACES:
        if backend == "native" and (why := cluster.mode_unavailable("native")):
            cluster.log(f"preemption_cluster: native skipped: {why}")
            continue
        rows.append(trial(cluster, backend, nodes, arrivals))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 nodes, 2 arrivals per backend")
    parser.add_argument("--json", metavar="FILE", help="also write the records to FILE")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=2)
    if args.output == "json":
        for row in rows:
            print(json.dumps(row))
    else:
        from bench.report import print_rows

        print_rows("preemption_cluster", rows)
    # gangkeeper leaving a Job partly bound or a high Job unbound is a bug, not a figure.
    gate = [r for r in rows if r["backend"] == "gate"]
    return 0 if gate and all(r["all_bound"] and not r["partly_bound"] for r in gate) else 1


if __name__ == "__main__":
    sys.exit(main())
