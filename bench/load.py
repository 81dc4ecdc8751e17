"""Load: 10,000 pods in 1,000 gangs of mixed kinds and sizes, created concurrently on a
1,000-node kwok fleet (`sandbox up --nodes 1000`), and what is left when it settles,
against the same trace with gangkeeper out of the way in the same sandbox.

`python -m bench.load [--quick] [--nodes N] [--gangs G] [--native] [--no-baseline] [--json FILE]`

The gangs cycle through sizes 2, 4, 8, 16, 32, 2, 4, 8, 16, 8 (2 to 32, mean 10 pods,
so N gangs are 10 N pods) of one-GPU members and through three kinds: bare pods with
gangkeeper's annotations (60 %), Indexed Jobs (30 %; the Job controller creates the
pods) and JobSets (10 %; JobSet's controller, then the Job controller). The fleet holds
8 GPUs a node, 0.8 GPU per pod asked for, so about a fifth of the gangs cannot fit and
must stay whole and gated. Everything is created at once by 16 threads, in a seeded
shuffled order, into one namespace.

One sandbox, three phases in this order:
1. the baseline (`bench.load_baseline`): the same trace in a namespace that did not opt
   in, the benchmark lifting each complete gang's gates that fit (the controller's
   patch, pinned) and kube-scheduler binding: the same creates, patches and binds
   without gangkeeper's cost. Then its namespace is deleted and its pods are gone
   before what follows (run first, it gets the fresher etcd: the ratio errs against
   gangkeeper);
2. idle admission: 200 bare pods of the trace created one at a time with
   `dryRun=All` in the opted-in namespace (the webhooks answer as for a real create;
   nothing is stored);
3. the load: the trace in the opted-in namespace, gangkeeper gating and releasing.
4. with `--native`: the load's namespace deleted and gone, the same trace in a namespace
   routed to gangkeeper's `native` backend (`namespaceBackends`): gangkeeper creates
   each gang's `scheduling.k8s.io` PodGroup and lifts its gate, and kube-scheduler's
   own gang scheduling places it whole or not at all. Its gangs that cannot be placed
   stay Pending ungated, so this phase has settled once every pod exists, none is
   gated, no gang is partly bound and nothing changed for STALL_SECONDS (30 s at 100
   gangs or fewer); its settle time is still the last change the watch saw. Figures
   `native_*`, and `native_settle_ratio` against the gate backend's settle.

`--no-baseline` skips phase 1 (no `settle_ratio`): on this 2-core machine the API server
deletes the baseline's 50,000 pods of the 5,000-node trace at about 10 a second, so
phase 3 could not start on a free fleet within the hour.

Settled = every pod exists, every released pod is bound, no gang is partly bound and
the deciding side would release nothing more (gangkeeper: its own planning,
`policies.release.ungate`; the baseline: every gang decided), polled every 10 s; the
settle time is the last change a watch of the namespace saw (a pod created or bound),
from the first create. A run also ends when nothing changed for 120 s and the
controller finished two planning passes meanwhile ("stalled": it looked and released
nothing), or at a deadline. A pass of 10,000 pods can take a minute on a loaded
machine, and the controller waits twice its last pass before the next, so 120 s of
quiet alone is no sign of a stall.

Figures (targets first): pods lost (expected members that never appeared), gangs
left gated that fit now (what the controller's own planning would still release), gangs
partly bound; settle time against the baseline's (`settle_ratio`); per gang, its last
member seen → all its gates seen lifted, p50/p99, and → all its members seen bound
(`bench.pod_watch`: both moments as this process saw them, one clock), for gangkeeper
and the baseline; the controller's
planning pass p50/p99 (its `gangkeeper_controller_plan_seconds` histogram) and mean;
`/mutate` and `/validate` p50/p99 during the burst and idle (gangkeeper's own
histograms, quantiles interpolated within their buckets), and the create call as the
client saw it for the bare pods; gangkeeper's CPU (cores, both processes, over the load;
and over the baseline, when it only watches) and the RSS and peak of every process of
the sandbox (`rss_<process>_mb`, `peak_<process>_mb`), read at the end.
`--quick`: 40 nodes, 40 gangs (400 pods).

Pure part: `gang_mix`, `outcome`, `release_lags`, `histogram_quantile`. Live part:
starts and stops its own sandbox in a temporary directory and creates objects only there.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.memory import process_memory_mb
from bench.scheduling import percentile

NAMESPACE = "bench-load"
#: Phase 4 (`--native`): the trace on gangkeeper's `native` backend.
NATIVE_NAMESPACE = "bench-load-native"
#: Gang sizes in the order the cycle draws them: 2 to 32, 100 pods per 10 gangs.
SIZES = (2, 4, 8, 16, 32, 2, 4, 8, 16, 8)
#: (kind, share of the gangs), in the order the cycle draws them.
KINDS = (("pods", 6), ("job", 3), ("jobset", 1))
GPUS_PER_NODE = 8
#: GPUs on the fleet per pod asked for: some gangs cannot fit.
GPU_RATIO = 0.8
WORKERS = 16
POLL_SECONDS = 10.0
STALL_SECONDS = 120.0
#: The native phase of a run of at most 100 gangs settles after this much quiet.
NATIVE_QUIET_QUICK = 30.0
#: Controller passes that must end within a quiet spell for it to count as a stall.
STALL_PASSES = 2
PLAN = "gangkeeper_controller_plan_seconds"
PLAN_COUNT = f"{PLAN}_count"
ADMISSION = "gangkeeper_admission_duration_seconds"
#: Bare pods created one at a time, dry run, to measure admission idle.
IDLE_CREATES = 200
GANG_LABEL = "gangkeeper.io/gang"
JOB_NAME_LABEL = "job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: The baseline's bare pods: no gangkeeper key, so gangkeeper's controller ignores them.
BENCH_GANG_LABEL = "bench.gangkeeper.io/gang"


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


def owner(pod: Mapping[str, Any]) -> str | None:
    """The gang a pod of the trace belongs to: its JobSet, Job or bare-pod gang."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for key in (JOBSET_NAME_LABEL, JOB_NAME_LABEL, GANG_LABEL, BENCH_GANG_LABEL):
        if labels.get(key):
            return str(labels[key])
    return None


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
    members = _members(pods)
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


def _members(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    members: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        gang = owner(pod)
        if gang:
            members.setdefault(gang, []).append(pod)
    return members


def release_lags(
    pods: Iterable[Mapping[str, Any]], seen: Mapping[str, float],
    then: Mapping[str, float],
) -> list[float]:
    """Seconds from each gang's last member seen to its last member reaching `then`
    (the watch's `ungated`: gates lifted; `bound`: bound). A gang with a member not
    there yet, or one the watch missed, is left out."""
    lags = []
    for found in _members(pods).values():
        names = [str(p["metadata"]["name"]) for p in found]
        if all(n in seen and n in then for n in names):
            lags.append(max(then[n] for n in names) - max(seen[n] for n in names))
    return lags


# -- live ----------------------------------------------------------------------------------


def _template(gate: str | None = None, gang: str = "") -> dict[str, Any]:
    # The release patch adds an annotation (its time), which a JSON patch cannot do
    # to a map that does not exist: gangkeeper's admission gives every gang pod some,
    # the baseline's pods get one of the benchmark's own.
    return {
        "metadata": {"annotations": {BENCH_GANG_LABEL: gang} if gate else {}},
        "spec": {
            **({"schedulingGates": [{"name": gate}]} if gate else {}),
            "restartPolicy": "Never",
            "containers": [{
                "name": "trainer", "image": "registry.invalid/bench/trainer:1",
                "resources": {"requests": {"nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}},
            }],
        },
    }


def _job_spec(spec: GangSpec, gate: str | None) -> dict[str, Any]:
    return {"completionMode": "Indexed", "completions": spec.size, "parallelism": spec.size,
            "backoffLimit": 0, "template": _template(gate, spec.name)}


def _objects(
    spec: GangSpec, namespace: str = NAMESPACE, gate: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(collection path, body) to create for one gang. With `gate` (the baseline) the
    pods carry that gate, and bare pods a label of the benchmark's own instead of
    gangkeeper's annotations."""
    ns = f"/namespaces/{namespace}"
    if spec.kind == "job":
        return [(f"/apis/batch/v1{ns}/jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": spec.name},
            "spec": _job_spec(spec, gate)})]
    if spec.kind == "jobset":
        return [(f"/apis/jobset.x-k8s.io/v1alpha2{ns}/jobsets", {
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": spec.name},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 1,
                                         "template": {"spec": _job_spec(spec, gate)}}]}})]
    from gangkeeper.policies.names import GANG_NAME_ANNOTATION, MIN_MEMBER_ANNOTATION

    keys: dict[str, Any] = (
        {"labels": {BENCH_GANG_LABEL: spec.name},
         "annotations": {BENCH_GANG_LABEL: spec.name}} if gate else {"annotations": {
            GANG_NAME_ANNOTATION: spec.name, MIN_MEMBER_ANNOTATION: str(spec.size)}}
    )
    bodies = []
    for i in range(spec.size):
        pod = {"apiVersion": "v1", "kind": "Pod", **_template(gate, spec.name)}
        pod["metadata"] = {"name": f"{spec.name}-{i:02d}", **keys}
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


def _buckets(
    samples: Mapping[str, float], family: str, endpoint: str | None = None
) -> dict[float, float]:
    """Cumulative bucket counts of a histogram (of one endpoint when given), summed over
    its other labels: {le: count}."""
    buckets: dict[float, float] = {}
    for name, value in samples.items():
        if not name.startswith(f"{family}_bucket{{"):
            continue
        labels = dict(
            part.split("=", 1) for part in name[name.index("{") + 1:-1].split(",")
        )
        if endpoint is not None and labels.get("endpoint", "").strip('"') != endpoint:
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

    def run(self, specs: Sequence[GangSpec], namespace: str, gate: str | None) -> None:
        work = [obj for spec in specs for obj in _objects(spec, namespace, gate)]
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


def _quantiles_ms(
    before: Mapping[str, float], after: Mapping[str, float], family: str,
    endpoint: str | None = None,
) -> tuple[float | None, float | None]:
    """p50 and p99 (ms) of the observations a histogram gained between two scrapes."""
    old, new = _buckets(before, family, endpoint), _buckets(after, family, endpoint)
    gained = [(le, new[le] - old.get(le, 0.0)) for le in new]
    p50, p99 = (histogram_quantile(gained, q) for q in (0.5, 0.99))
    return (None if p50 is None else round(p50 * 1000, 2),
            None if p99 is None else round(p99 * 1000, 2))


def stalled(quiet_seconds: float, passes_meanwhile: float) -> bool:
    """Nothing changed for STALL_SECONDS while the controller planned STALL_PASSES times."""
    return quiet_seconds >= STALL_SECONDS and passes_meanwhile >= STALL_PASSES


Finished = Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]], bool]


def _left_to_release(
    pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> int:
    """Gangs of the load's namespace that gangkeeper's own planning would release now.
    (The native phase has none to judge: it lifts a gang's gate once its PodGroup
    exists, and kube-scheduler decides what fits.)"""
    from gangkeeper.policies.release.ungate import ungate_plan
    from gangkeeper.policies.settings.config import load_config

    return len(ungate_plan(list(pods), list(nodes), load_config({}), time.time(),
                           namespace=NAMESPACE).releases)


def _nothing_left_to_release(
    pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> bool:
    return _left_to_release(pods, nodes) == 0


def _settle(
    rest: Any, specs: Sequence[GangSpec], log: Any, passes: Callable[[], float], *,
    namespace: str = NAMESPACE, finished: Finished = _nothing_left_to_release,
    quiet_settles: float | None = None,
) -> tuple[list[Mapping[str, Any]], str]:
    """Poll (every POLL_SECONDS: listing 10,000 pods loads the API server too) until
    the load has settled: every pod exists, every released pod is bound, no gang is
    partly bound, and `finished` (the deciding side would release nothing more). Or
    until `stalled` (`passes()`: the deciding side's passes so far), or the deadline.
    With `quiet_settles` (the native phase: released gangs that cannot be placed stay
    Pending ungated) it has settled once every pod exists, none is gated, no gang is
    partly bound and nothing changed for that many seconds.
    The pods then, and which."""
    expected = sum(s.size for s in specs)
    last: tuple[int, int, int] | None = None
    known = [0.0]

    def counted() -> float:  # the count never goes back: a failed scrape keeps the last
        known[0] = max(known[0], float(passes()))
        return known[0]

    stable_since, passes_then = time.monotonic(), counted()
    deadline = time.monotonic() + max(300.0, min(2400.0, expected * 0.24))
    while True:
        pods = _listed(rest, f"/api/v1/namespaces/{namespace}/pods", log)
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
        if (changed and len(pods) >= expected and len(pods) - gated == bound
                and not outcome(specs, pods)["gangs_partly_bound"] and finished(pods, nodes)):
            return pods, "settled"
        quiet, planned = time.monotonic() - stable_since, counted() - passes_then
        if (quiet_settles is not None and quiet >= quiet_settles and len(pods) >= expected
                and gated == 0 and not outcome(specs, pods)["gangs_partly_bound"]):
            return pods, "settled"
        if stalled(quiet, planned):
            return pods, f"stalled ({quiet:.0f} s without a change, {planned:.0f} passes)"
        if time.monotonic() > deadline:
            return pods, "deadline"
        time.sleep(POLL_SECONDS)


def _wait_namespace(rest: Any, namespace: str) -> None:
    from gangkeeper.webhook.kube.api import ApiError

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            rest.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            return
        except ApiError:
            time.sleep(0.5)


def _delete_namespace(rest: Any, namespace: str, log: Any) -> float:
    """Delete a namespace and wait until it is gone (its pods too): seconds taken.
    Its JobSets, Jobs and pods go first, at once and without grace (the namespace
    controller alone would delete the pods one by one with theirs)."""
    from gangkeeper.webhook.kube.api import ApiError

    started = time.monotonic()
    log(f"deleting namespace {namespace}")
    ns = f"/namespaces/{namespace}"
    # Owners first, or their controllers recreate the pods deleted next.
    for path, query in (
        (f"/apis/jobset.x-k8s.io/v1alpha2{ns}/jobsets", [("propagationPolicy", "Background")]),
        (f"/apis/batch/v1{ns}/jobs", [("propagationPolicy", "Background")]),
        (f"/api/v1{ns}/pods", [("gracePeriodSeconds", "0")]),
    ):
        try:
            rest.request("DELETE", path, query, timeout=600)
        except ApiError as err:  # a timed-out answer: the namespace's deletion ends it
            log(f"DELETE {path}: {err}")
    rest.request("DELETE", f"/api/v1/namespaces/{namespace}")
    while time.monotonic() - started < 1800:
        try:
            rest.get(f"/api/v1/namespaces/{namespace}")
        except ApiError as err:
            if err.status == 404:
                return time.monotonic() - started
        time.sleep(POLL_SECONDS)
    log(f"namespace {namespace} still there after 1800 s")
    return time.monotonic() - started


@dataclass
class Phase:
    """One burst of the trace into one namespace, and what the watch saw."""

    pods: list[Mapping[str, Any]]
    end: str
    created_s: float
    settled_s: float
    lags: list[float]
    #: Per gang bound whole: its last member seen → its last member seen bound.
    bind_lags: list[float]
    create_ms: list[float]
    failures: list[str]
    watch_gaps: int

    def figures(self, specs: Sequence[GangSpec], prefix: str = "") -> dict[str, Any]:
        return {
            f"{prefix}{key}": value for key, value in {
                **{k: v for k, v in outcome(specs, self.pods).items()
                   if k not in ("gangs", "pods_expected")},
                "create_failures": len(self.failures), "created_s": round(self.created_s, 1),
                "settled_s": round(self.settled_s, 1), "end": self.end,
                "lifted_p50_s": _rounded(self.lags, 50, 3),
                "lifted_p99_s": _rounded(self.lags, 99, 3),
                "bound_p50_s": _rounded(self.bind_lags, 50, 3),
                "bound_p99_s": _rounded(self.bind_lags, 99, 3),
                "create_p50_ms": _rounded(self.create_ms, 50, 1),
                "create_p99_ms": _rounded(self.create_ms, 99, 1),
                "watch_gaps": self.watch_gaps,
            }.items()
        }


def _rounded(values: Sequence[float], q: float, digits: int) -> float | None:
    return round(percentile(list(values), q), digits) if values else None


def _phase(
    rest: Any, specs: Sequence[GangSpec], namespace: str, log: Any, *,
    passes: Callable[[], float], gate: str | None = None,
    finished: Finished = _nothing_left_to_release,
    listener: Callable[[Mapping[str, Any]], None] | None = None,
    quiet_settles: float | None = None,
) -> Phase:
    """Create the trace into `namespace` at once and wait until it settles, watching."""
    from bench.pod_watch import Observer
    from gangkeeper.policies.names import GATE

    version = str(rest.get(f"/api/v1/namespaces/{namespace}/pods", [("limit", 1)])
                  ["metadata"]["resourceVersion"])
    watch = Observer(rest, version, namespace, gate=gate or GATE, listener=listener)
    watch.thread.start()
    burst, started = _Burst(rest), time.monotonic()
    burst.run(specs, namespace, gate)
    created_s = time.monotonic() - started
    log(f"{namespace}: created in {created_s:.0f}s ({len(burst.failures)} failed)")
    pods, how = _settle(rest, specs, log, passes, namespace=namespace, finished=finished,
                        quiet_settles=quiet_settles)
    ended = time.monotonic()
    watch.stop.set()
    # Copies: the watch's thread may still be stamping one last event.
    seen, ungated, bound = dict(watch.seen), dict(watch.ungated), dict(watch.bound)
    last = max([*seen.values(), *bound.values()], default=ended)
    return Phase(
        pods=list(pods), end=how, created_s=created_s,
        settled_s=(last if how == "settled" else ended) - started,
        lags=release_lags(pods, seen, ungated),
        bind_lags=release_lags(pods, seen, bound),
        create_ms=burst.create_ms, failures=burst.failures, watch_gaps=watch.gaps,
    )


def _idle_admission(rest: Any, specs: Sequence[GangSpec]) -> None:
    """IDLE_CREATES bare pods of the trace, one at a time, as dry runs: the webhooks
    answer them as real creates; nothing is stored."""
    bodies = [obj for spec in specs if spec.kind == "pods" for obj in _objects(spec)]
    for path, body in bodies[:IDLE_CREATES]:
        rest.request("POST", path, [("dryRun", "All")], body=body)


@dataclass
class Baseline:
    phase: Phase
    release_failures: list[str]
    #: gangkeeper's CPU (cores) while the baseline ran beside it, watching only.
    watching_cpu: float
    cleared_s: float


def _baseline(
    rest: Any, sandbox: Any, specs: Sequence[GangSpec], pids: Sequence[int], log: Any
) -> Baseline:
    """Phase 1 (`bench.load_baseline`), its namespace deleted and gone afterwards."""
    from bench.load_baseline import BASELINE_GATE, BASELINE_NAMESPACE, Releaser, node_slots

    sandbox.kubectl("create", "namespace", BASELINE_NAMESPACE)
    _wait_namespace(rest, BASELINE_NAMESPACE)
    fleet = node_slots(_listed(rest, "/api/v1/nodes", log), GPUS_PER_NODE)
    releaser = Releaser(rest, {s.name: s.size for s in specs}, fleet, owner)
    cpu_before, started = sum(map(_cpu_seconds, pids)), time.monotonic()
    # The releaser decides as pods arrive: quiet alone is a stall here.
    phase = _phase(rest, specs, BASELINE_NAMESPACE, log, passes=time.monotonic,
                   gate=BASELINE_GATE, listener=releaser,
                   finished=lambda _pods, _nodes: releaser.undecided() == 0)
    watching = (sum(map(_cpu_seconds, pids)) - cpu_before) / (time.monotonic() - started)
    releaser.close()
    cleared_s = _delete_namespace(rest, BASELINE_NAMESPACE, log)
    log(f"baseline settled in {phase.settled_s:.0f}s ({phase.end}); "
        f"its namespace deleted in {cleared_s:.0f}s")
    return Baseline(phase, releaser.failures, watching, cleared_s)


def measure(
    nodes: int, gangs: int, log: Any = print, *, native: bool = False, baseline: bool = True
) -> dict[str, Any]:
    import ssl

    from gangkeeper.webhook.kube.client import api_client
    from gangkeeper.webhook.kube.rest import Rest
    from gangkeeper.webhook.sandbox import Sandbox
    from gangkeeper.webhook.sandbox.sandbox import CONTROLLER_PROCESS

    specs = gang_mix(gangs)
    with tempfile.TemporaryDirectory(prefix="gangkeeper-load-") as directory:
        sandbox = Sandbox(Path(directory))
        config = Path(directory) / "bench-load-config.yaml"
        # gangkeeper's defaults but for the native phase's namespace.
        config.write_text(json.dumps({"namespaceBackends": {NATIVE_NAMESPACE: "native"}}))
        try:
            started = time.monotonic()
            info = sandbox.up(fleet=None, node_count=nodes, timeout=1800, config=config,
                              components=("kwok", "jobset"))
            log(f"sandbox of {nodes} nodes up in {time.monotonic() - started:.0f}s")
            client = api_client(str(info.kubeconfig))
            client.configuration.connection_pool_maxsize = WORKERS + 4
            rest = Rest(client)
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
            floor = _baseline(rest, sandbox, specs, pids, log) if baseline else None

            sandbox.kubectl("create", "namespace", NAMESPACE)
            sandbox.kubectl("label", "namespace", NAMESPACE, "gangkeeper.io/enabled=true")
            _wait_namespace(rest, NAMESPACE)
            idle = scrape()
            _idle_admission(rest, specs)
            before = scrape()
            cpu_before, load_started = sum(map(_cpu_seconds, pids)), time.monotonic()
            load = _phase(rest, specs, NAMESPACE, log,
                          passes=lambda: _plan_count(control_url, tls))
            cpu = (sum(map(_cpu_seconds, pids)) - cpu_before) / (time.monotonic() - load_started)
            after = scrape()
            memory = {name: process_memory_mb(r.pid) for name in sandbox.processes.names()
                      if sandbox.processes.alive(name)
                      and (r := sandbox.processes.record(name)) is not None}
            left = _left_to_release(load.pods, _listed(rest, "/api/v1/nodes", log))
            native_figures = _native(rest, sandbox, specs, log) if native else {}
            rest.close_all()
        finally:
            sandbox.down()
    return {
        "nodes": nodes, "gpus": nodes * GPUS_PER_NODE, "gangs": len(specs),
        "pods_expected": sum(s.size for s in specs),
        **load.figures(specs),
        "gangs_left_gated_that_fit": left,
        **_baseline_figures(floor, load, specs),
        **native_figures,
        **({"native_settle_ratio": round(native_figures["native_settled_s"]
                                         / load.settled_s, 2)} if native_figures else {}),
        **_metric_figures(idle, before, after),
        "gangkeeper_cpu_cores": round(cpu, 2),
        **{f"rss_{name}_mb": round(rss, 1) for name, (rss, _) in sorted(memory.items())},
        **{f"peak_{name}_mb": round(peak, 1) for name, (_, peak) in sorted(memory.items())},
        "failures_sample": [*load.failures, *(
            [*floor.phase.failures, *floor.release_failures] if floor else [])][:3],
    }


def _baseline_figures(
    floor: Baseline | None, load: Phase, specs: Sequence[GangSpec]
) -> dict[str, Any]:
    """The baseline's figures and the load's settle against it (none without one)."""
    if floor is None:
        return {"settle_ratio": None}
    return {
        **floor.phase.figures(specs, "baseline_"),
        "baseline_release_failures": len(floor.release_failures),
        "settle_ratio": round(load.settled_s / floor.phase.settled_s, 2)
        if floor.phase.settled_s > 0 else None,
        "baseline_cleared_s": round(floor.cleared_s, 1),
        "gangkeeper_cpu_cores_in_baseline": round(floor.watching_cpu, 2),
    }


def _native(
    rest: Any, sandbox: Any, specs: Sequence[GangSpec], log: Any
) -> dict[str, Any]:
    """Phase 4: the load's namespace deleted and gone, the trace on the native backend.
    Settled once quiet for STALL_SECONDS (NATIVE_QUIET_QUICK for a quick run's 400 pods:
    kube-scheduler retries a gang that did not fit within seconds there)."""
    from gangkeeper.policies.names import ENABLED_LABEL

    cleared_s = _delete_namespace(rest, NAMESPACE, log)
    log(f"{NAMESPACE} deleted in {cleared_s:.0f}s; the trace again on the native backend")
    sandbox.kubectl("create", "namespace", NATIVE_NAMESPACE)
    sandbox.kubectl("label", "namespace", NATIVE_NAMESPACE, f"{ENABLED_LABEL}=true")
    _wait_namespace(rest, NATIVE_NAMESPACE)
    phase = _phase(rest, specs, NATIVE_NAMESPACE, log, passes=time.monotonic,
                   finished=lambda _pods, _nodes: True,
                   quiet_settles=STALL_SECONDS if len(specs) > 100 else NATIVE_QUIET_QUICK)
    log(f"native settled in {phase.settled_s:.0f}s ({phase.end})")
    groups = _listed(rest, f"/apis/{_podgroup_version(rest)}/namespaces/{NATIVE_NAMESPACE}"
                     "/podgroups", log)
    return {**phase.figures(specs, "native_"), "native_podgroups": len(groups),
            "cleared_s": round(cleared_s, 1)}


def _podgroup_version(rest: Any) -> str:
    """The scheduling.k8s.io version that serves PodGroups (not the preferred one:
    PriorityClasses are v1, PodGroups beta)."""
    for served in rest.get("/apis/scheduling.k8s.io")["versions"]:
        version = str(served["groupVersion"])
        if any(r.get("name") == "podgroups"
               for r in rest.get(f"/apis/{version}").get("resources") or ()):
            return version
    raise RuntimeError("the API server serves no scheduling.k8s.io PodGroups")


def _metric_figures(
    idle: Mapping[str, float], before: Mapping[str, float], after: Mapping[str, float]
) -> dict[str, Any]:
    """Admission quantiles idle (`idle` → `before`) and during the load (`before` →
    `after`), and the planning passes of the load, from three scrapes."""
    mutate = _quantiles_ms(before, after, ADMISSION, "mutate")
    validate = _quantiles_ms(before, after, ADMISSION, "validate")
    quiet = _quantiles_ms(idle, before, ADMISSION, "mutate")
    plan = _quantiles_ms(before, after, PLAN)
    passes = after.get(PLAN_COUNT, 0.0) - before.get(PLAN_COUNT, 0.0)
    plan_s = after.get(f"{PLAN}_sum", 0.0) - before.get(f"{PLAN}_sum", 0.0)
    return {
        "mutate_p50_ms": mutate[0], "mutate_p99_ms": mutate[1],
        "validate_p50_ms": validate[0], "validate_p99_ms": validate[1],
        "mutate_idle_p50_ms": quiet[0], "mutate_idle_p99_ms": quiet[1],
        "mutate_p99_vs_idle": round(mutate[1] / quiet[1], 2)
        if mutate[1] and quiet[1] else None,
        "plan_passes": int(passes),
        "plan_ms_per_pass": round(1000 * plan_s / passes, 1) if passes else None,
        "plan_p50_ms": plan[0], "plan_p99_ms": plan[1],
    }


def run(
    quick: bool, nodes: int | None = None, gangs: int | None = None, native: bool = False,
    baseline: bool = True,
) -> list[dict[str, Any]]:
    gangs = gangs or (40 if quick else 1000)
    pods = sum(s.size for s in gang_mix(gangs))
    nodes = nodes or max(1, round(pods * GPU_RATIO / GPUS_PER_NODE))
    return [measure(nodes, gangs, native=native, baseline=baseline,
                    log=lambda m: print(f"[load] {m}", file=sys.stderr, flush=True))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="40 gangs (400 pods), 40 nodes")
    parser.add_argument("--nodes", type=int, help="fleet size (default: 0.8 GPU per pod)")
    parser.add_argument("--gangs", type=int, help="gangs to create (default 1000)")
    parser.add_argument("--native", action="store_true",
                        help="then the same trace on the native backend (phase 4)")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="skip phase 1 (the API server alone): no settle_ratio")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = run(args.quick, args.nodes, args.gangs, args.native, args.baseline)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    from bench.report import print_rows

    print_rows("load", [{k: v for k, v in r.items() if k != "failures_sample"} for r in rows])
    return 0 if all(r["pods_lost"] == 0 and r["gangs_partly_bound"] == 0
                    and r["gangs_left_gated_that_fit"] == 0
                    and r.get("native_pods_lost", 0) == 0
                    and r.get("native_gangs_partly_bound", 0) == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
