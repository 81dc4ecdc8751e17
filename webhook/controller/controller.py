"""`GangController`: the thin I/O loop around the pure plan.

Threads (all daemons, all stopped by `stop()`):
- **elector**: acquire/renew the Lease `gangkeeper-controller` (`kube.lease`); only
  while it holds the lease does the controller write anything.
- **informers**: list+watch every pod and every node (`kube.informer`: the server's,
  shared with its cluster view, or the controller's own when it runs alone); pods are
  kept reduced to `PodInfo`s, and only those a plan can depend on: gang members and pods
  that want GPUs (bound and in-flight GPU pods are what make GPUs used; any other pod
  is dropped at ingestion). Nodes are kept as the few fields planning reads, and only
  nodes that offer GPUs.
- **reconciler**: after changes settle (a few milliseconds), run `release.plan(...)` (through
  a `release.planner.Planner`, which keeps each Node's facts between passes, and the
  last plan while the stores' generations say nothing changed) on the caches; as
  leader, perform its releases: ensure the group object (create; "already exists" is
  fine), then remove gangkeeper's gate from every gated member in
  one burst of concurrent JSON patches. Each patch `test`s the gate list and the
  resourceVersion it read, so a pod changed meanwhile is left for the next pass (a
  change no plan sees is retried once), and never loses another system's gate.
  A release that needs nothing written first (no group object, no placeholders) has
  its patches sent the moment the pass decides it, while the pass goes on (`burst`);
  the others after the pass.
  Writes are fenced (`fencing`): the Lease is re-read before a burst and our renewal
  deadline checked before every write, so a leader paused past its lease writes
  nothing when it wakes. Stuck gangs get Events (once per gang, cause and member
  count per process: `release.stuck_events`); members released to rejoin a released
  gang (a replacement of a deleted member) are counted and get a Normal Event.
  After a pass in which GPUs were freed, released coscheduling PodGroups whose pods
  are not all bound get an annotation touched, so the Coscheduling plugin retries
  them now rather than at its 5-minute flush (`release.requeue` decides,
  `executor` sends).

Nothing is remembered that the API does not hold: a new leader re-reads pods, gates
and group objects and finishes whatever a previous leader left half done.

Every decision is the pure core's: the plan's (`gangkeeper.policies.release.plan`),
and, from it and the memory the senders keep between passes (passed in as plain
values), `release.actions` (stuck Events, nudges), `release.watchdog_actions`,
`release.placeholder_actions`, `release.request_actions`,
`release.preemption_actions` and `release.release_actions` (what a release's answers
are said and counted as). The senders only send and record what the API answered:
`releaser` (groups, placeholders deleted, gates lifted; `gangkeeper ungate` uses the
same), `executor`, `watchdog`, `placeholders`, `provisioning`, `preemption`. The write
bodies are `writes`' (pure). Every read and write goes through the `Api` given as
`api` (a test's in-memory one), else a client of its own.

May do API I/O; decides nothing itself (see also `kube.election`).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from kubernetes.client import ApiClient

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.node_facts import node_fields
from gangkeeper.policies.cluster.observed_gangs import (
    PodInfo,
    is_live,
    matters,
    pod_info,
    same_for_planning,
)
from gangkeeper.policies.cluster.shared_parts import SharedParts
from gangkeeper.policies.names import LEASE_NAME
from gangkeeper.policies.release.budgets import Budget, read_budget
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.planner import Planner, decisions
from gangkeeper.policies.release.release_actions import after_release
from gangkeeper.policies.release.results import GangReport, Plan, Release
from gangkeeper.policies.settings.config import Config

from ..kube.api import Api
from ..kube.device_view import DeviceView, names_shared, with_device_names
from ..kube.informer import Informer, Informers, Store, object_key
from ..kube.lease import LeaderElector
from ..kube.resources import BUDGETS, NODES, PODS
from ..kube.rest import Rest
from ..series import Sample, Series
from .burst import Burst
from .events import GangEvents
from .executor import Executor, Senders
from .faults import Faults
from .group_writer import GroupWriter
from .placeholders import PlaceholderWriter
from .preemption import Preemptions
from .provisioning import ProvisioningRequests
from .releaser import Releaser
from .samples import flattened, samples_of
from .timings import GangTimings
from .watchdog import Watchdog
from .writes import WRITE_QUERY

log = logging.getLogger(__name__)


#: Concurrent gate-removal patches in one release burst (the default of `workers`).
PATCH_WORKERS = 32
#: How often a pass is checked against `plan()` from scratch (`_cross_check`): the
#: check costs a second pass, so not every time.
CROSS_CHECK_SECONDS = 60.0


class GangController:
    """Leader-elected gang releaser; see the module docstring."""

    def __init__(
        self,
        api_client: ApiClient,
        config: Config,
        *,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        workers: int = PATCH_WORKERS,
        settle_seconds: float = 0.02,
        resync_seconds: float = 10.0,
        informers: Informers | None = None,
        api: Api | None = None,
        devices: bool = False,
    ) -> None:
        """`informers`: the process's shared ones (the server's); None: the controller
        lists and watches Pods and Nodes on its own client, started and stopped with it.
        `api`: what every read and write goes through (a test's fake API server);
        None: a client of its own on a copy of `api_client`'s configuration.
        `devices`: count DRA devices (`kube.device_view`): Nodes carry their
        ResourceSlices' devices as `dra:<class>` allocatable and pods ask their
        claims' devices as limits of those names, counted as GPUs."""
        self.config = config = with_device_names(config) if devices else config
        self.namespace = namespace
        self.identity = identity or f"gangkeeper-{uuid.uuid4().hex[:8]}"
        self._settle = settle_seconds
        self._resync = resync_seconds
        self._workers = workers
        # Our own client on a copy of the caller's configuration: one pooled
        # connection per patch worker (or the burst queues on the pool), and closing
        # it on stop() cannot break the server's watches.
        configuration = copy.deepcopy(api_client.configuration)
        configuration.connection_pool_maxsize = max(
            configuration.connection_pool_maxsize or 0, workers + 8
        )
        self.rest: Api = api if api is not None else Rest(ApiClient(configuration))
        self._dirty = threading.Event()
        self.elector = LeaderElector(
            self.rest,
            namespace=namespace,
            name=LEASE_NAME,
            identity=self.identity,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            write_query=WRITE_QUERY,
            # A new leader plans at once: a predecessor may have left a release half done.
            on_elected=self._elected,
        )
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pool: ThreadPoolExecutor | None = None
        self._last_plan = Plan(releases=(), reports=())
        self._planned_at = 0.0
        #: Keeps each Node's facts between passes (`release.planner`).
        self._planner = Planner(config)
        #: When the last pass was checked against a from-scratch plan (monotonic).
        self._checked_at = -CROSS_CHECK_SECONDS
        self._plan_seconds = 0.0
        #: The controller's counters and summaries (the gauges are computed at a scrape).
        self.series = Series()
        #: Pending gangs by reason, wait and gate-removal histograms (`timings`).
        self.timings = GangTimings()
        self.groups = GroupWriter(self.rest, self.series.add, self._served_by_devices)
        self.events = GangEvents(
            self.rest, self.identity, lambda: self._pool, may_write=lambda: not self._fenced(),
        )
        self.watchdog = Watchdog(
            self.rest, config, self.events, self.series.add, may_write=lambda: not self._fenced()
        )
        self._faults = Faults()
        #: Equal demands and placements of the pods kept are one object each.
        self._shared = SharedParts()
        self._own_informers = informers is None
        self._informers = Informers(self.rest) if informers is None else informers
        self.pods: Store[PodInfo] = Store(self._pod, self._dirty.set, same=same_for_planning)
        self.nodes: Store[Mapping[str, Any]] = Store(self._node, self._dirty.set)
        #: Placeholder pods for gangs that wait for an autoscaler (`placeholders.py`).
        self.placeholders = PlaceholderWriter(
            self.rest, config, pool=self._release_pool, emit=self.events.send,
            count=self.series.add,
            write_query=WRITE_QUERY, may_write=lambda: not self._fenced(),
        )
        #: Sends releases: group objects, placeholders deleted, gates lifted.
        self.releaser = Releaser(
            self.rest, self.groups, self.placeholders.delete, self._pod, self.series.add,
            may_write=lambda: not self._fenced(), lifted=self._lifted,
        )
        #: ResourceSlices, DeviceClasses and claim templates, in front of `nodes`.
        #: Pods naming a shared ResourceClaim, as last read (key -> raw): read again
        #: when a claim changes (allocated, freed), which their `shared_claims` and
        #: pin doubt depend on. Few: most pods' claims are made from templates.
        self._sharers: dict[str, Mapping[str, Any]] = {}
        self._sharers_lock = threading.Lock()
        self.devices = DeviceView(self.nodes, pools=config.pools,
                                  on_claims=self._claims_changed) if devices else None
        self._watched: dict[str, Informer] = {
            "pods": self._informers.subscribe(PODS, self.pods),
            "nodes": self._informers.subscribe(NODES, self.devices or self.nodes),
        }
        if self.devices is not None:
            self.devices.subscribe(self._informers)
        #: PodDisruptionBudgets, for preemption (not waited for: a cluster without any,
        #: or RBAC from before preemption, must not keep the controller from planning).
        self.budgets: Store[Budget] = Store(read_budget, self._dirty.set)
        self._informers.subscribe(BUDGETS, self.budgets)
        self.preemptions = Preemptions(
            self.rest, self.events, self.watchdog, self.series.add,
            may_write=lambda: not self._fenced(),
        )
        #: ProvisioningRequests (`autoscaling: provisioningrequest` only; not waited for:
        #: where the API is not served, placeholders stand in).
        self.requests = ProvisioningRequests.watching(
            self._informers, self.rest, config, self._dirty.set, pool=self._release_pool,
            emit=self.events.send, count=self.series.add, write_query=WRITE_QUERY,
            may_write=lambda: not self._fenced(),
        )
        #: Sends what each pass decides besides its releases, and keeps its memory.
        self.executor = Executor(
            self.rest, config, self.events, self._release_pool, self.series.add,
            wake=self._dirty.set, may_write=lambda: not self._fenced(),
            senders=Senders(self.placeholders, self.requests, self.watchdog, self.preemptions),
        )

    def _served_by_devices(self) -> frozenset[str]:
        """Resources DeviceClasses serve by `extendedResourceName` (none without
        `devices`): PodGroups leave them out of minResources."""
        return self.devices.extended_names() if self.devices is not None else frozenset()

    def _release_pool(self) -> ThreadPoolExecutor:
        pool = self._pool
        assert pool is not None, "the controller is not started"
        return pool

    def _elected(self) -> None:
        # What changed while no one led is unknown: nudge PodGroups once.
        self.executor.forget()
        self.watchdog.elected()  # and Jobs a predecessor left suspended: resume them
        self._dirty.set()

    def _pod(self, raw: Mapping[str, Any]) -> PodInfo | None:
        if not is_live(raw):
            return None
        verdict = None
        if self.devices is not None:
            # Its claims' devices as limits, so a bound pod uses them on its node and
            # a gated member asks them (a claim whose template is unknown asks none),
            # and whether that count can pin it. Not its shared claims: their names are
            # no node's resource, and once allocated their devices are not free on
            # their node whichever pods run.
            namespace = str((raw.get("metadata") or {}).get("namespace") or "")
            verdict = self.devices.pinning(raw, namespace)
            self._remember_sharer(raw)
            raw = self.devices.with_claims(raw, namespace, shared=False)[0]
        info = pod_info(raw, self.config, self._shared,
                        claims=None if verdict is None else verdict.doubt,
                        pin_extra=None if verdict is None else verdict.extra,
                        shared_claims=() if verdict is None else verdict.shared)
        return info if matters(info) else None

    def _remember_sharer(self, raw: Mapping[str, Any]) -> None:
        spec = raw.get("spec")
        shares = isinstance(spec, Mapping) and names_shared(spec)
        key = object_key(raw)
        with self._sharers_lock:
            if shares:
                self._sharers[key] = raw
            else:
                self._sharers.pop(key, None)

    def _claims_changed(self) -> None:
        """A ResourceClaim changed: the pods sharing claims are read again (a pod gone,
        or of another version since, is forgotten; its newer version was read then)."""
        with self._sharers_lock:
            sharers = list(self._sharers.items())
        for key, raw in sharers:
            if not self.pods.refresh(raw):
                with self._sharers_lock:
                    if self._sharers.get(key) is raw:
                        del self._sharers[key]

    def _node(self, raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return node_fields(raw)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the watches, the elector and the reconciler (returns at once)."""
        self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="gang-release")
        if self._own_informers:
            self._informers.start()
        threads = (
            (lambda: self.elector.run(self._stop), "elector"),
            (self._reconcile_loop, "reconciler"),
        )
        for target, name in threads:
            thread = threading.Thread(target=target, name=f"gang-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop every thread and give the lease up so another replica takes over at once."""
        self._stop.set()
        self._dirty.set()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self.elector.release()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self._own_informers:
            self._informers.stop()  # which closes self.rest, their client
        else:
            self.rest.close_all()

    @property
    def is_leader(self) -> bool:
        return self.elector.is_leader

    @property
    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self._watched.values())

    def reports(self) -> tuple[GangReport, ...]:
        """The last pass's view of every gang (what `gangkeeper status` computes)."""
        return self._last_plan.reports

    # -- reconcile ---------------------------------------------------------------------------

    def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait(self._next_wait())
            if self._stop.is_set():
                return
            # Let a burst of watch events (a Job creating 1,000 pods) settle into one
            # pass. When passes are costly (a big cluster), wait at least twice the last
            # one: planning then takes at most a third of the process's time, and the
            # admissions served by the same process (same GIL) keep the rest.
            self._stop.wait(max(self._settle, 2 * self._plan_seconds))
            self._dirty.clear()
            try:
                self.reconcile_once()
            except Exception:  # one bad pass must not end the loop
                log.exception("gang controller pass failed")
                self._stop.wait(1.0)

    def _next_wait(self) -> float:
        """Seconds to the next pass with no change seen: the resync, or sooner the
        deadline the last plan waits for (a gang turning stuck is acted on then, not
        at the next resync). A plan good only for its instant waits for the resync."""
        planned, until = self._planned_at, self._last_plan.valid_until
        if until <= planned:
            return self._resync
        return max(self._settle, min(self._resync, until - time.time()))

    def reconcile_once(self) -> Plan:
        """One pass: plan from the caches; as leader, release and report."""
        if not self.synced:
            return self._last_plan
        started = time.monotonic()
        requests = self.requests.served() if self.requests is not None else None
        # The generations first: a change after them makes the next pass a full one.
        version = (self.pods.generation, self.nodes.generation)
        pods, nodes, now = self.pods.items(), self.nodes.items(), time.time()
        inputs: dict[str, Any] = {
            "requests": requests, "leaving": self.preemptions.leaving(pods, now),
            "budgets": self.budgets.items(),
        }
        checking = started - self._checked_at >= CROSS_CHECK_SECONDS
        # A checked pass's releases wait for the check (the full plan may win).
        burst = self._burst(early=self.is_leader and not checking)
        result = self._planner.plan(
            pods, nodes, now, self.placeholders.backoff, version=version,
            on_release=burst.decided if burst is not None else None, **inputs,
        )
        if checking:
            result = self._cross_check(result, pods, nodes, now, inputs)
            self._checked_at = started
        self._plan_seconds = time.monotonic() - started
        self.series.observe(cat.CONTROLLER_PLAN_SECONDS, self._plan_seconds)
        self._last_plan, self._planned_at = result, now
        self.timings.observe(result.reports, time.time())
        if not self.is_leader or self._stop.is_set():
            return result
        if result.releases and burst is not None:
            started = time.monotonic()
            self._release_all(result.releases, burst)
            self.series.observe(cat.GANG_RELEASE_SECONDS, time.monotonic() - started)
            # Patched pods are in the cache already; re-plan so the next gang in line
            # is judged against them.
            self._dirty.set()
        # Every other action of the pass, decided in one value, on the caches as the
        # releases left them.
        wall = time.time()
        actions = self.executor.decide(result, self.pods.items(), self.nodes.items(), requests,
                                       wall)
        self.executor.send_pass(actions, wall)
        return result

    def _cross_check(
        self, result: Plan, pods: list[PodInfo], nodes: list[Mapping[str, Any]], now: float,
        inputs: dict[str, Any],
    ) -> Plan:
        """The planner's pass against `plan()` from scratch on the same state: a
        difference is a bug in what the planner keeps between passes; it is logged and
        counted, and the full plan wins."""
        full = plan(pods, nodes, self.config, now, self.placeholders.backoff, **inputs)
        if decisions(full) == decisions(result):
            return result
        log.warning("a planning pass differed from a from-scratch plan of the same state; "
                    "using the from-scratch plan")
        self.series.add(cat.PLAN_DIVERGENCE)
        self._planner.forget()  # what it kept made the difference: the next pass decides all
        return full

    def _fenced(self) -> bool:
        """Not (or no longer surely) the leader: count the write we do not make."""
        if self.elector.holds():
            return False
        self.series.add(cat.CONTROLLER_FENCED_WRITES)
        return True

    def _burst(self, *, early: bool) -> Burst | None:
        """This pass's burst (None before `start`): sent as decided if `early`."""
        if self._pool is None:
            return None
        return Burst(self._pool, self.releaser.lift, confirm=self._confirm,
                     before_first=lambda: self._faults.at("before-group"), early=early)

    def _confirm(self) -> bool:
        # Our caches may be older than another leader's writes: make sure, per burst.
        if self.elector.confirm():
            return True
        self.series.add(cat.CONTROLLER_FENCED_WRITES)
        return False

    def _release_all(self, releases: tuple[Release, ...], burst: Burst) -> None:
        if not burst.confirmed():
            return
        ready = self.releaser.prepare(releases)
        started = time.monotonic()
        futures = {uid: f for release in ready for uid, f in burst.submit(release).items()}
        wait(futures.values())
        self._faults.at("after-burst")
        lifted = {uid for uid, f in futures.items() if f.result() == "ungated"}
        elapsed = time.monotonic() - started
        for release in ready:
            log.info(
                "released gang %s/%s: %d pods in %.3fs",
                release.gang.namespace, release.gang.name, len(release.pods), elapsed,
            )
            self.timings.released(release, elapsed, time.time())
            events, counts = after_release(release, lifted)
            for family, labels, value in counts:
                self.series.add(family, labels, value)
            for event in events:
                self.events.send(event)

    def _lifted(self, answer: Mapping[str, Any]) -> None:
        self.pods.put(answer)
        self._faults.at("mid-burst")

    # -- metrics ---------------------------------------------------------------------------------

    def metric_samples(self) -> dict[Sample, float]:
        """Labelled samples ({(name, labels): value}): a `webhook.server.metrics` Collector.
        The gauges are computed from the last plan; the counters are `series`."""
        return samples_of(
            self._last_plan, leader=self.is_leader, synced=self.synced,
            watchdog=self.watchdog.gauges,
            relists={resource: i.relists for resource, i in self._watched.items()},
            series=self.series,
        )

    def metrics(self) -> dict[str, float]:
        """The same numbers flattened to {name: value} (`samples.flattened`)."""
        return flattened(self.metric_samples())
