"""The headline benchmark: one seeded training-job trace replayed under each gang mode.

A fake 64-GPU fleet (8 kwok nodes x 8 `nvidia.com/gpu`) is served by the sandbox's
real kube-apiserver, kube-scheduler, kube-controller-manager and kwok. The same trace
of training jobs (gang sizes 1-32 GPUs, Poisson arrivals) is replayed, time-compressed,
once per mode:

| mode | namespace | what places the pods |
| --- | --- | --- |
| `none` | not opted in | the default scheduler, pod by pod |
| `gate` | opted in, backend `gate` | gangkeeper's controller lifts whole gangs' gates |
| `native` | opted in, override `native` | Kubernetes' gang scheduling (`GenericWorkload`) |
| `coscheduling` | opted in, override `coscheduling` | scheduler-plugins Coscheduling |
| `kueue` | not opted in, Jobs queued by Kueue | Kueue's `waitForPodsReady`, default scheduler |
| `kueue+gate` | opted in, backend `gate`, Jobs queued by Kueue | Kueue's quota, then gangkeeper |

The two Kueue modes need the sandbox's `kueue` component (`open_cluster(kueue=True)`,
which `run()` asks for): Kueue v0.17.0's manager with `waitForPodsReady` on
(`bench.cluster.KUEUE_CONFIG` says which values and why) and one ClusterQueue per
namespace whose quota is the fleet's GPUs and CPUs. Their Jobs carry
`kueue.x-k8s.io/queue-name`; Kueue creates them suspended and unsuspends each once its
quota admits it. Kueue's eviction of a Job whose pods were not all Ready in time
deletes its pods: a bound pod deleted before its gang ran is logged as a `release`,
so its GPUs stop counting as held.

Each trace job is an Indexed batch/v1 Job. Its pods start on kwok's nodes as they are
bound, but, like real workers waiting in a rendezvous, they train only once every
member runs: then the driver gives each pod its trace duration (kwok's
`pod-complete.stage.kwok.x-k8s.io/delay`), kwok completes the pods when it elapses,
and the Job controller completes the Job. A partly bound gang never trains, so its
GPUs stay held. Everything the driver sees is an `Event` in a log; the figures (idle
GPU-seconds of partial gangs, deadlocked gangs, completed jobs, makespan, wait) are
computed from that log by the pure `outcome()`, which the unit tests exercise with
synthetic logs.

Pure part (trace, events, metrics): no I/O. Live part (`Replay`, `run`): talks only to
the API server of the cluster it is given, creates and deletes only its own namespaces,
nodes and pods (all labelled `bench.gangkeeper.io/...`).
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from bench.cluster import RUN_FOR

if TYPE_CHECKING:
    from bench.cluster import BenchCluster

GPU = "nvidia.com/gpu"
FLEET_NODES = 8
GPUS_PER_NODE = 8
FLEET_LABEL = "bench.gangkeeper.io/fleet"
RUN_LABEL = "bench.gangkeeper.io/run"
JOB_LABEL = "bench.gangkeeper.io/job"

Mode = Literal["none", "gate", "native", "coscheduling", "kueue", "kueue+gate"]
MODES: tuple[Mode, ...] = ("none", "gate", "native", "coscheduling", "kueue", "kueue+gate")
#: The modes whose Jobs Kueue queues (their namespace has a LocalQueue of this name).
KUEUE_MODES: tuple[Mode, ...] = ("kueue", "kueue+gate")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LOCAL_QUEUE = "bench"
#: Namespaces are fixed so the gangkeeper config (written before the sandbox starts) can
#: route `native` to the native backend by a per-namespace override.
NAMESPACES: dict[Mode, str] = {
    "none": "bench-sched-none",
    "gate": "bench-sched-gate",
    "native": "bench-sched-native",
    "coscheduling": "bench-sched-coscheduling",
    "kueue": "bench-sched-kueue",
    "kueue+gate": "bench-sched-kueue-gate",
}
MODE_TITLES: dict[Mode, str] = {
    "none": "no gang scheduling",
    "gate": "gangkeeper gate",
    "native": "native (GenericWorkload)",
    "coscheduling": "coscheduling",
    "kueue": "Kueue waitForPodsReady",
    "kueue+gate": "Kueue + gangkeeper gate",
}


# ---------------------------------------------------------------------------- trace


@dataclass(frozen=True)
class TraceJob:
    """One training job: `members` pods of `gpus_per_member` GPUs each."""

    name: str
    arrival: float
    members: int
    gpus_per_member: int
    duration: float

    @property
    def gpus(self) -> int:
        return self.members * self.gpus_per_member


@dataclass(frozen=True)
class TraceParams:
    """What the trace is drawn from; the same params always give the same trace."""

    seed: int = 7
    jobs: int = 40
    #: Mean of the exponential inter-arrival time (a Poisson process), seconds.
    mean_interarrival: float = 1.0
    #: Durations are uniform in [0.5, 1.5] x this, seconds once all members are bound.
    mean_duration: float = 6.0
    #: Gang sizes in GPUs and their relative weights: mostly small jobs, some big enough
    #: (24, 32 of 64 GPUs) that two partial ones can block each other.
    sizes: tuple[int, ...] = (1, 2, 4, 8, 12, 16, 24, 32)
    weights: tuple[float, ...] = (3, 3, 3, 3, 2, 2, 1.5, 1.5)


def generate_trace(params: TraceParams) -> list[TraceJob]:
    """A reproducible job list: same params → same jobs, names in arrival order.

    The per-member size is a power of two up to one node (8 GPUs) that divides the gang
    size, so a gang can be anything from 32 one-GPU workers to 4 full nodes.
    """
    if params.jobs < 1:
        raise ValueError(f"TraceParams.jobs must be ≥ 1, got {params.jobs}")
    if params.mean_interarrival <= 0 or params.mean_duration <= 0:
        raise ValueError("TraceParams.mean_interarrival and mean_duration must be > 0")
    if len(params.sizes) != len(params.weights) or not params.sizes:
        raise ValueError("TraceParams.sizes and weights must be non-empty and equally long")
    fleet = FLEET_NODES * GPUS_PER_NODE
    if any(s < 1 or s > fleet for s in params.sizes):
        raise ValueError(f"TraceParams.sizes must lie in 1..{fleet}, got {params.sizes}")
    rng = random.Random(params.seed)
    jobs: list[TraceJob] = []
    t = 0.0
    for i in range(params.jobs):
        if i:
            t += rng.expovariate(1.0 / params.mean_interarrival)
        size = rng.choices(params.sizes, weights=params.weights)[0]
        per_member = rng.choice([p for p in (1, 2, 4, 8) if size % p == 0])
        duration = params.mean_duration * rng.uniform(0.5, 1.5)
        jobs.append(
            TraceJob(
                name=f"job-{i:03d}",
                arrival=round(t, 3),
                members=size // per_member,
                gpus_per_member=per_member,
                duration=round(duration, 3),
            )
        )
    return jobs


def ideal_makespan(
    jobs: Sequence[TraceJob], fleet_gpus: int = FLEET_NODES * GPUS_PER_NODE
) -> float:
    """A lower bound on any schedule's makespan: work / fleet, and last arrival + its run."""
    work = sum(j.gpus * j.duration for j in jobs) / fleet_gpus
    tail = max(j.arrival + j.duration for j in jobs)
    return max(work, tail)


# ------------------------------------------------------------------- events, metrics

EventKind = Literal["arrive", "bind", "release", "finish"]


@dataclass(frozen=True)
class Event:
    """Something the driver saw, `t` seconds after the trace started.

    `arrive`: the job's Job is being created. `bind`: pod `pod` got a node, holding
    `gpus`. `release`: pod `pod` finished (Succeeded: its GPUs are free). `finish`:
    every member finished its run.
    """

    t: float
    kind: EventKind
    job: str
    pod: str = ""
    gpus: int = 0


@dataclass(frozen=True)
class Outcome:
    """The figures of one mode, computed from its event log up to `horizon`."""

    jobs: int
    completed: int
    started: int
    #: Arrived but not finished within the horizon.
    deadlocked: int
    #: GPU-seconds held by bound pods of gangs not yet fully bound (idle waste).
    idle_gpu_seconds: float
    #: Share of the fleet's GPU-seconds over the horizon that were idle waste.
    idle_share: float
    #: Last finish time, only when every job completed (else None: no makespan).
    makespan: float | None
    last_finish: float | None
    #: Arrival → all members bound, over the jobs that started.
    wait_mean: float | None
    wait_p95: float | None
    #: First member bound → last member bound (how long a gang sat partly bound), p95
    #: and max over the jobs that started.
    spread_p95: float | None
    spread_max: float | None
    horizon: float
    #: (t, GPUs held by partial gangs) after every change, starting at (0, 0).
    partial_series: tuple[tuple[float, int], ...] = field(default=())
    #: (t, jobs completed so far) after every finish, starting at (0, 0).
    completed_series: tuple[tuple[float, int], ...] = field(default=())


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (the smallest value with at least p % at or below it)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < p <= 100:
        raise ValueError(f"percentile p must be in (0, 100], got {p}")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def _checked(events: Iterable[Event], jobs: Mapping[str, TraceJob], horizon: float) -> list[Event]:
    """The events up to the horizon in time order; unknown jobs or negative times refused."""
    if horizon <= 0:
        raise ValueError(f"horizon must be > 0, got {horizon}")
    ordered = sorted((e for e in events if e.t <= horizon), key=lambda e: e.t)
    for e in ordered:
        if e.job not in jobs:
            raise ValueError(f"event {e.kind} at t={e.t} names unknown job {e.job!r}")
        if e.t < 0:
            raise ValueError(f"event {e.kind} of {e.job} has negative time {e.t}")
    return ordered


def outcome(
    jobs: Sequence[TraceJob],
    events: Iterable[Event],
    horizon: float,
    fleet_gpus: int = FLEET_NODES * GPUS_PER_NODE,
) -> Outcome:
    """Compute a mode's figures from its event log.

    Events after `horizon` are ignored; pods still bound at the horizon count as held
    until it. A gang is *partial* from its first bind until the moment every member is
    bound; after that it runs, and the teardown (pods deleted one by one) is not waste.
    Duplicate binds of a bound pod and releases of an unbound pod change nothing (the
    watch can repeat itself).
    """
    by_name = {j.name: j for j in jobs}
    ordered = _checked(events, by_name, horizon)

    bound: dict[str, dict[str, int]] = {name: {} for name in by_name}
    first_bind: dict[str, float] = {}
    arrived: dict[str, float] = {}
    started: dict[str, float] = {}
    finished: dict[str, float] = {}
    partial_gpus = 0
    idle = 0.0
    last_t = 0.0
    partial_series: list[tuple[float, int]] = [(0.0, 0)]
    completed_series: list[tuple[float, int]] = [(0.0, 0)]

    def held(name: str) -> int:
        return sum(bound[name].values())

    for e in ordered:
        idle += partial_gpus * (e.t - last_t)
        last_t = e.t
        before = partial_gpus
        job = by_name[e.job]
        pods = bound[e.job]
        if e.kind == "arrive":
            arrived.setdefault(e.job, e.t)
        elif e.kind == "bind":
            if e.pod not in pods:
                pods[e.pod] = e.gpus
                first_bind.setdefault(e.job, e.t)
                if e.job not in started:
                    partial_gpus += e.gpus
                    if len(pods) >= job.members:
                        started[e.job] = e.t
                        partial_gpus -= held(e.job)
        elif e.kind == "release":
            if e.pod in pods:
                gpus = pods.pop(e.pod)
                if e.job not in started:
                    partial_gpus -= gpus
        elif e.kind == "finish" and e.job not in finished:
            finished[e.job] = e.t
            completed_series.append((e.t, len(finished)))
        if partial_gpus != before:
            partial_series.append((e.t, partial_gpus))
    idle += partial_gpus * (horizon - last_t)

    waits = [started[n] - arrived.get(n, by_name[n].arrival) for n in started]
    spreads = [started[n] - first_bind[n] for n in started]
    all_done = len(finished) == len(by_name)
    last_finish = max(finished.values()) if finished else None
    return Outcome(
        jobs=len(by_name),
        completed=len(finished),
        started=len(started),
        deadlocked=sum(1 for n in arrived if n not in finished),
        idle_gpu_seconds=idle,
        idle_share=idle / (fleet_gpus * horizon),
        makespan=last_finish if all_done else None,
        last_finish=last_finish,
        wait_mean=sum(waits) / len(waits) if waits else None,
        wait_p95=percentile(waits, 95) if waits else None,
        spread_p95=percentile(spreads, 95) if spreads else None,
        spread_max=max(spreads) if spreads else None,
        horizon=horizon,
        partial_series=tuple(partial_series),
        completed_series=tuple(completed_series),
    )


def summary_rows(results: dict[Mode, Outcome | str]) -> list[dict[str, Any]]:
    """One table row per mode; ratios against the baselines measured in the same run.

    `idle_vs_none`: idle GPU-seconds as a share of mode `none`'s (the no-gang baseline).
    `makespan_vs_best`: makespan over the best makespan among modes that completed
    every job. A string instead of an Outcome means the mode could not be measured.
    """
    measured = {m: o for m, o in results.items() if isinstance(o, Outcome)}
    base = measured.get("none")
    makespans = [o.makespan for o in measured.values() if o.makespan is not None]
    best = min(makespans) if makespans else None
    rows: list[dict[str, Any]] = []
    for mode in MODES:
        if mode not in results:
            continue
        o = results[mode]
        row: dict[str, Any] = {"mode": mode, "title": MODE_TITLES[mode]}
        if not isinstance(o, Outcome):
            row["status"] = f"not measurable: {o}"
            rows.append(row)
            continue
        row.update(
            status="measured",
            jobs=o.jobs,
            completed=o.completed,
            deadlocked=o.deadlocked,
            idle_gpu_s=round(o.idle_gpu_seconds, 1),
            idle_share=round(o.idle_share, 4),
            idle_vs_none=(
                round(o.idle_gpu_seconds / base.idle_gpu_seconds, 3)
                if base is not None and base.idle_gpu_seconds > 0
                else None
            ),
            makespan_s=None if o.makespan is None else round(o.makespan, 1),
            makespan_vs_best=(
                round(o.makespan / best, 3) if o.makespan is not None and best else None
            ),
            wait_mean_s=None if o.wait_mean is None else round(o.wait_mean, 2),
            wait_p95_s=None if o.wait_p95 is None else round(o.wait_p95, 2),
            bind_spread_p95_s=None if o.spread_p95 is None else round(o.spread_p95, 2),
            bind_spread_max_s=None if o.spread_max is None else round(o.spread_max, 2),
            horizon_s=round(o.horizon, 1),
            series={
                "partial_gpus": [list(p) for p in o.partial_series],
                "completed": [list(p) for p in o.completed_series],
            },
        )
        rows.append(row)
    return rows


# ------------------------------------------------------------------------ live driver


class RawRequests(Protocol):
    """What the driver needs for writes: `bench.cluster.RawApi.request`."""

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]: ...


#: kwok completes a Ready pod this long after the annotation appears (its run time).
#: Trace pods are Ready as soon as they run: the trace's durations are the whole run.
READY_AFTER = "pod-ready.stage.kwok.x-k8s.io/delay"


def job_manifest(
    job: TraceJob, *, run_id: str, fleet: str, queue: str | None = None
) -> dict[str, Any]:
    """One trace job as an Indexed Job of `members` pods (gangkeeper recognises it),
    queued to the LocalQueue `queue` when given (Kueue reads the Job's label)."""
    gpus = str(job.gpus_per_member)
    labels = {RUN_LABEL: run_id, JOB_LABEL: job.name}
    job_labels = {**labels, QUEUE_LABEL: queue} if queue else labels
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job.name, "labels": job_labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": job.members,
            "parallelism": job.members,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels, "annotations": {READY_AFTER: "0s"}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {FLEET_LABEL: fleet},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "worker",
                            "image": "registry.invalid/train:bench",
                            "resources": {
                                "requests": {GPU: gpus, "cpu": "100m"},
                                "limits": {GPU: gpus},
                            },
                        }
                    ],
                },
            },
        },
    }


def run_id(mode: Mode, stamp: int) -> str:
    """The run's label value: `kueue+gate` has a `+`, which no label value may."""
    return f"{mode.replace('+', '-')}-{stamp}"


def run_patch(duration: float) -> bytes:
    """The merge patch that starts a member's run: kwok completes it `duration` later."""
    annotations = {RUN_FOR: f"{round(duration * 1000)}ms"}
    return json.dumps({"metadata": {"annotations": annotations}}).encode()


class Replay:
    """Replay a trace in one namespace and log what happens.

    Threads: a watch on the namespace's pods logs binds, starts the run of a gang
    once all its members are bound, and logs members finishing (and bound members
    deleted before they finished: Kueue's eviction, a rebind); the main loop creates
    the Jobs at arrival times; a small pool does the API calls so a slow create never
    delays the clock. All shared state is guarded by one lock.
    """

    def __init__(
        self,
        core: Any,
        raw: RawRequests,
        namespace: str,
        jobs: Sequence[TraceJob],
        *,
        run_id: str,
        fleet: str,
        horizon: float,
        frozen_after: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
        queue: str | None = None,
    ) -> None:
        self.core = core
        self.queue = queue
        self.raw = raw
        self.namespace = namespace
        self.jobs = list(jobs)
        self.run_id = run_id
        self.fleet = fleet
        self.horizon = horizon
        self.frozen_after = frozen_after
        self.clock = clock
        self.events: list[Event] = []
        self.errors: list[str] = []
        self.retries = 0
        #: Bound members deleted before they finished (their gang lost them).
        self.lost = 0
        self.frozen_at: float | None = None
        self._by_name = {j.name: j for j in self.jobs}
        self._lock = threading.Lock()
        self._bound: dict[str, set[str]] = {j.name: set() for j in self.jobs}
        self._succeeded: dict[str, set[str]] = {j.name: set() for j in self.jobs}
        self._to_start: list[tuple[str, str]] = []
        self._finished: set[str] = set()
        self._running: set[str] = set()
        self._stop = threading.Event()
        self._t0 = 0.0
        self._last_change = 0.0

    def _partial_held(self) -> int:
        """GPUs bound to gangs that have not started (caller holds the lock)."""
        return sum(
            len(pods) * self._by_name[name].gpus_per_member
            for name, pods in self._bound.items()
            if name not in self._running and name not in self._finished
        )

    def _now(self) -> float:
        return self.clock() - self._t0

    def _log(self, event: Event) -> None:
        self.events.append(event)
        self._last_change = event.t

    def _on_pod(self, pod: Any) -> None:
        labels = pod.metadata.labels or {}
        name = labels.get(JOB_LABEL)
        node = pod.spec.node_name if pod.spec is not None else None
        if name not in self._by_name or not node:
            return
        job = self._by_name[name]
        pod_name = pod.metadata.name
        with self._lock:
            if name in self._finished:
                return
            t = self._now()
            pods = self._bound[name]
            if pod_name not in pods:
                pods.add(pod_name)
                self._log(Event(t, "bind", name, pod_name, job.gpus_per_member))
                if len(pods) == job.members:
                    # The whole gang runs: training starts (the rendezvous completes).
                    self._running.add(name)
                    self._to_start.extend((name, p) for p in sorted(pods))
            phase = pod.status.phase if pod.status is not None else None
            done = self._succeeded[name]
            if phase == "Succeeded" and pod_name not in done:
                done.add(pod_name)
                self._log(Event(t, "release", name, pod_name, job.gpus_per_member))
                if len(done) == job.members:
                    self._running.discard(name)
                    self._finished.add(name)
                    self._log(Event(t, "finish", name))

    def _on_gone(self, pod: Any) -> None:
        """A pod deleted: if it was bound and had not finished, its GPUs are free again
        and its gang (which no longer has every member) is not running."""
        labels = pod.metadata.labels or {}
        name = labels.get(JOB_LABEL)
        if name not in self._by_name:
            return
        pod_name = pod.metadata.name
        with self._lock:
            pods = self._bound[name]
            if name in self._finished or pod_name not in pods:
                return
            if pod_name in self._succeeded[name]:
                return
            pods.discard(pod_name)
            self.lost += 1
            self._running.discard(name)
            gpus = self._by_name[name].gpus_per_member
            self._log(Event(self._now(), "release", name, pod_name, gpus))

    def _watch(self) -> None:
        from kubernetes import watch  # lazy: the pure part must import without a client

        selector = f"{RUN_LABEL}={self.run_id}"
        resource_version = ""
        while not self._stop.is_set():
            w = watch.Watch()  # type: ignore[no-untyped-call]
            try:
                for ev in w.stream(  # type: ignore[no-untyped-call]
                    self.core.list_namespaced_pod,
                    self.namespace,
                    label_selector=selector,
                    resource_version=resource_version,
                    timeout_seconds=2,
                ):
                    obj = ev["object"]
                    resource_version = obj.metadata.resource_version or resource_version
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self._on_pod(obj)
                    elif ev["type"] == "DELETED":
                        self._on_gone(obj)
                    if self._stop.is_set():
                        break
            except Exception as exc:  # a dropped watch is re-listed, not fatal
                if "410" in str(exc) or "Expired" in str(exc):
                    resource_version = ""
                elif not self._stop.is_set():
                    self.errors.append(f"watch: {exc}")
                    time.sleep(0.2)
            finally:
                w.stop()  # type: ignore[no-untyped-call]

    def _call(
        self,
        what: str,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> None:
        """One API call, retried like a controller would on a transient failure.

        A create answered 409 on a retry means the first attempt did land. Anything
        still failing is recorded (a rejected pod is a result, not a crash).
        """
        for attempt in range(4):
            try:
                status, answer = self.raw.request(method, path, body, content_type=content_type)
            except OSError as exc:
                status, answer = 0, str(exc).encode()
            if 200 <= status < 300 or (status == 409 and attempt > 0):
                return
            if status not in (0, 429, 500, 502, 503, 504):
                break
            self.retries += 1
            time.sleep(0.2 * (attempt + 1))
        text = " ".join(answer.decode(errors="replace").split())[:300]
        self.errors.append(f"{what}: HTTP {status} {text}")

    def _create(self, job: dict[str, Any]) -> None:
        path = f"/apis/batch/v1/namespaces/{self.namespace}/jobs"
        self._call(f"create {job['metadata']['name']}", "POST", path, json.dumps(job).encode())

    def _start_run(self, job: str, pod: str) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}"
        patch = run_patch(self._by_name[job].duration)
        self._call(f"start {pod}", "PATCH", path, patch, "application/merge-patch+json")

    def run(self) -> list[Event]:
        """Replay until every job finished, the horizon passed, or the state froze.

        Frozen = hold-and-wait with no way out: every job has arrived, none is
        running (so no pod will ever finish and no GPU be freed), some GPUs are held
        by partial gangs, and nothing changed for `frozen_after` seconds (longer than
        the scheduler's 10 s maximum backoff, so every pending pod was retried against
        this exact capacity). The rest of the horizon would only repeat the same state,
        and `outcome()` extends the held GPUs to the horizon. A mode where nothing is
        held (gangs waiting whole, e.g. in the scheduler's Permit stage) can still move,
        so it runs on to the horizon.
        """
        pending = sorted(self.jobs, key=lambda j: j.arrival)
        watcher = threading.Thread(target=self._watch, name="bench-watch", daemon=True)
        self._t0 = self.clock()
        watcher.start()
        time.sleep(0.3)  # let the watch open before the first pod exists
        self._t0 = self.clock()
        with ThreadPoolExecutor(max_workers=6, thread_name_prefix="bench-api") as pool:
            while True:
                now = self._now()
                while pending and pending[0].arrival <= now:
                    job = pending.pop(0)
                    with self._lock:
                        self._log(Event(now, "arrive", job.name))
                    manifest = job_manifest(
                        job, run_id=self.run_id, fleet=self.fleet, queue=self.queue
                    )
                    pool.submit(self._create, manifest)
                with self._lock:
                    starts, self._to_start = self._to_start, []
                for name, pod_name in starts:
                    pool.submit(self._start_run, name, pod_name)
                with self._lock:
                    done = len(self._finished) == len(self.jobs)
                    frozen = (
                        not pending
                        and not self._running
                        and self._partial_held() > 0
                        and now - self._last_change >= self.frozen_after
                    )
                if done or now >= self.horizon:
                    break
                if frozen:
                    self.frozen_at = now
                    break
                time.sleep(0.02)
        self._stop.set()
        watcher.join(timeout=5)
        with self._lock:
            return list(self.events)


# ------------------------------------------------------------------------ entry point


def params_for(quick: bool) -> TraceParams:
    """Time-compressed traces: the full one keeps 48 jobs busy for about a minute.

    The quick one (24 jobs, same compression) exists so the whole `--quick` suite fits
    in 5 minutes; the headline figures come from the full run.
    """
    if quick:
        return TraceParams(seed=7, jobs=24, mean_interarrival=0.5, mean_duration=3.0)
    return TraceParams(seed=7, jobs=48, mean_interarrival=1.0, mean_duration=6.0)


def horizon_for(jobs: Sequence[TraceJob]) -> float:
    """The same horizon for every mode: 3 x the ideal makespan plus slack.

    Generous on purpose: binding and releasing take real time on a busy 2-core machine,
    so a mode that merely runs slowly should still finish; what remains unfinished at
    the horizon is deadlocked, not late.
    """
    return round(3.0 * ideal_makespan(jobs) + 15.0, 1)


def run(
    quick: bool, cluster: BenchCluster | None = None, modes: Sequence[Mode] = MODES
) -> list[dict[str, Any]]:
    """Replay the trace under every mode on a sandbox (started here, with Kueue,
    unless given; a given one without Kueue reports the Kueue modes not measurable)."""
    from bench.cluster import open_cluster

    if cluster is None:
        with open_cluster(quick=quick, kueue=True) as own:
            return run(quick, own, modes)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"bench.scheduling modes: unknown {unknown}; known: {list(MODES)}")
    return _run_modes(quick, cluster, modes)


def _run_modes(quick: bool, cluster: BenchCluster, modes: Sequence[Mode]) -> list[dict[str, Any]]:
    jobs = generate_trace(params_for(quick))
    horizon = horizon_for(jobs)
    fleet = "sched"
    nodes = cluster.ensure_fleet(fleet, FLEET_NODES, GPUS_PER_NODE, label=FLEET_LABEL)
    if cluster.runs_kueue():
        for mode in (m for m in KUEUE_MODES if m in modes):
            cluster.ensure_kueue_queue(NAMESPACES[mode], LOCAL_QUEUE, nodes)
    results: dict[Mode, Outcome | str] = {}
    notes: dict[Mode, str] = {}
    raw: dict[Mode, list[list[Any]]] = {}
    cluster.log(
        f"scheduling: {len(jobs)} jobs, {sum(j.members for j in jobs)} pods, "
        f"horizon {horizon:.0f} s per mode"
    )
    for mode in modes:
        reason = cluster.mode_unavailable(mode, NAMESPACES[mode])
        if reason:
            cluster.log(f"scheduling: {mode}: not measurable: {reason}")
            results[mode] = reason
            continue
        cluster.log(f"scheduling: {mode}: replaying")
        namespace = NAMESPACES[mode]
        try:
            cluster.wait_nodes_free(nodes)
        except TimeoutError as exc:  # the previous mode's clean-up did not finish
            results[mode] = f"the fleet was not free: {exc}"
            continue
        replay = Replay(
            cluster.core,
            cluster.raw,
            namespace,
            jobs,
            run_id=run_id(mode, int(time.time())),
            fleet=fleet,
            horizon=horizon,
            queue=LOCAL_QUEUE if mode in KUEUE_MODES else None,
        )
        events = replay.run()
        # Computed before the clean-up, so a clean-up that fails loses no figures.
        results[mode] = done = outcome(jobs, events, horizon)
        try:
            cluster.clear_pods(namespace)
        except (OSError, RuntimeError, TimeoutError) as exc:
            cluster.log(f"scheduling: {mode}: clean-up failed: {exc}")
            notes[mode] = f"clean-up failed: {exc}"
        raw[mode] = [[round(e.t, 3), e.kind, e.job, e.pod, e.gpus] for e in events]
        cluster.log(
            f"scheduling: {mode}: {done.completed}/{done.jobs} completed, "
            f"{done.idle_gpu_seconds:.0f} idle GPU-s, {len(replay.errors)} API errors"
        )
        extra = []
        if replay.frozen_at is not None:
            extra.append(f"frozen at t={replay.frozen_at:.1f}s (held GPUs extended to horizon)")
        if replay.retries:
            extra.append(f"{replay.retries} API calls retried")
        if replay.lost:
            extra.append(f"{replay.lost} bound pods deleted before they finished")
        if replay.errors:
            extra.append(f"{len(replay.errors)} API errors, first: {replay.errors[0]}")
        notes[mode] = "; ".join([*extra, *filter(None, [notes.get(mode)])])
    rows = summary_rows(results)
    for row in rows:
        note = notes.get(row["mode"])
        if note:
            row["note"] = note
        if row["mode"] in raw:
            row["events"] = raw[row["mode"]]
        row["trace"] = {
            "seed": params_for(quick).seed,
            "jobs": len(jobs),
            "gpus": sum(j.gpus for j in jobs),
            "ideal_makespan_s": round(ideal_makespan(jobs), 1),
        }
    return rows


if __name__ == "__main__":  # pragma: no cover - manual entry point
    import sys

    from bench.cluster import open_cluster
    from bench.report import print_rows

    quick = "--quick" in sys.argv[1:]

    def _progress(message: str) -> None:  # stderr: stdout is exactly the table
        print(f"[scheduling {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    with open_cluster(quick=quick, log=_progress, kueue=True) as sandbox:
        rows = run(quick, sandbox)
    if "--json" in sys.argv[1:]:
        sys.stdout.write(json.dumps(rows) + "\n")
    else:
        print_rows("scheduling", rows)
