"""Which waiting gangs ask the autoscaler for nodes, for which members, until when.

One `Asking` per planning pass (`release.plan` makes it and calls it for every `gate`
gang). The rules:

1. **Placeholders are the gang's reserved room.** Every placeholder pod counts as used
   GPUs in the pass (bound ones where they are, pending ones placed first-fit, like
   any pod in flight), so no other gang is released into room a gang asked for. For
   the gang itself they are lent back before its fit check (`lend`), so once they are
   bound the gang fits exactly where they are, and its release deletes them.
2. **Who may ask.** A complete `gate` gang that does not fit now, with autoscaling
   `placeholders` for its namespace, that could fit the cluster with its declared
   pools grown to their maximum, and whose members may use a declared pool (or any
   pool, with `clusterAutoscales`). Oldest first, and **one gang per pool at a time**:
   a later gang that may use a pool an earlier asking gang may use waits, asking for
   nothing. Two gangs asking together could each get part of a pool that holds one
   (the partial placement gang scheduling exists to prevent, moved to placeholders).
3. **For which members.** Each gated member with a GPU demand that has no room now
   (first-fit over the free GPUs, the gang's own placeholders counted as used) gets
   one placeholder, named after the member, so a restarted controller finds them.
   Placeholders of members that now have room, of gangs that no longer ask, and of
   gangs that are gone are deleted.
4. **ProvisioningRequests instead** (`autoscaling: provisioningrequest`, where the
   cluster serves them: `requests` is not None): rules 2 and the pool claim hold; the
   gang's request is decided by `provisioning.decide`, and a gang released while its
   request is provisioned carries its consume annotations (`consume`).
5. **Timeout.** When the oldest placeholder of an ask is `provisioningTimeoutSeconds`
   old and the gang has not been released, all of its placeholders are deleted and
   the gang waits `provisioningRetrySeconds` doubled per timeout (at most 16 times it) before asking
   again; the controller keeps that backoff (`Backoff`) and says why in an Event.

Pure: `PodInfo`s and the pass's `Fleet` in, `Ask`s out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..cluster.fleet import Fleet
from ..cluster.observed_gangs import GangObservation, PodInfo
from ..eligibility import node_eligible
from ..model import Placement
from ..settings.config import Config
from .placeholders import placeholder_name
from .provisioning import (
    RequestAsk,
    RequestInfo,
    consume_annotations,
    current,
    decide,
    orphans,
    outcome,
)

#: (namespace, gang label, arrival) → (asks that timed out, epoch seconds of the next ask).
Backoff = Mapping[tuple[str, str, float], tuple[int, float]]
#: Claim of a gang on every pool (`clusterAutoscales` with no declared pool matching).
ANY_POOL = "*"


@dataclass(frozen=True)
class Ask:
    """What the controller does for one asking gang this pass."""

    gang: GangObservation
    #: Members that get a placeholder now (none exists for them yet).
    create: tuple[PodInfo, ...]
    #: This gang's placeholders to delete (members that have room now, or a timeout).
    delete: tuple[PodInfo, ...]
    #: Placeholders the gang has after this pass (existing and created).
    wanted: int
    #: Placeholders bound to a node.
    bound: int
    #: The ask timed out this pass: the Event's text; "" otherwise.
    timed_out: str = ""
    #: After a timeout: how many asks have timed out, and when (epoch) to ask again.
    attempts: int = 0
    retry_at: float = 0.0


def gang_key(gang: GangObservation) -> tuple[str, str, float]:
    return (gang.namespace, gang.label, gang.arrived)


@dataclass
class Asking:
    """The placeholders of one pass and the pools claimed so far (see module docstring)."""

    config: Config
    now: float
    backoff: Backoff = field(default_factory=dict)
    #: (namespace, gang label) → its live placeholders, by name.
    by_gang: dict[tuple[str, str], dict[str, PodInfo]] = field(default_factory=dict)
    #: Where the pass placed pending placeholders (uid → node), first-fit.
    spots: dict[str, str] = field(default_factory=dict)
    claimed: dict[str, GangObservation] = field(default_factory=dict)
    asks: list[Ask] = field(default_factory=list)
    #: Gangs whose placeholders this pass keeps or deletes itself.
    handled: set[tuple[str, str]] = field(default_factory=set)
    #: The ProvisioningRequests gangkeeper made, by gang; None: the API is not served.
    requests: dict[tuple[str, str], list[RequestInfo]] | None = None
    request_asks: list[RequestAsk] = field(default_factory=list)
    #: uids of the requests this pass keeps.
    kept: set[str] = field(default_factory=set)
    #: A gang's asking was decided against the clock (timeouts, backoff, ages in its
    #: reason): the same state may be decided otherwise a second later.
    clocked: bool = False

    @classmethod
    def of(
        cls,
        pods: Iterable[PodInfo],
        config: Config,
        now: float,
        backoff: Backoff,
        requests: Iterable[RequestInfo] | None = None,
    ) -> Asking:
        asking = cls(config=config, now=now, backoff=backoff)
        if requests is not None:
            asking.requests = {}
            for request in requests:
                key = (request.namespace, request.gang)
                asking.requests.setdefault(key, []).append(request)
        for pod in pods:
            if pod.placeholder_for and not pod.deleting:
                key = (pod.namespace, pod.placeholder_for)
                asking.by_gang.setdefault(key, {})[pod.name] = pod
        return asking

    def placed(self, pod: PodInfo, node: str | None) -> None:
        """The pass placed an in-flight pod on `node` (remembered for placeholders)."""
        if pod.placeholder_for and node is not None:
            self.spots[pod.uid] = node

    def own(self, gang: GangObservation) -> tuple[PodInfo, ...]:
        return tuple(self.by_gang.get(gang.key, {}).values())

    def lend(self, gang: GangObservation, fleet: Fleet) -> list[tuple[PodInfo, str]]:
        """Take the gang's own placeholders off the fleet (their room is the gang's)."""
        lent: list[tuple[PodInfo, str]] = []
        for pod in self.own(gang):
            node = pod.node_name or self.spots.get(pod.uid)
            if node and pod.demand:
                fleet.unplace(pod.uid, node, pod.demand, pod.requests)
                lent.append((pod, node))
        return lent

    @staticmethod
    def restore(lent: Sequence[tuple[PodInfo, str]], fleet: Fleet) -> None:
        for pod, node in lent:
            fleet.add(pod.uid, node, pod.demand, pod.requests)

    def released(self, gang: GangObservation) -> tuple[PodInfo, ...]:
        """The gang is released this pass: its placeholders go with the release."""
        self.handled.add(gang.key)
        return self.own(gang)

    def _by_request(self, gang: GangObservation) -> bool:
        """The gang asks through a ProvisioningRequest (asked for, and served)."""
        mode = self.config.autoscaling.mode_for(gang.namespace)
        return mode == "provisioningrequest" and self.requests is not None

    def _requests_of(self, gang: GangObservation) -> list[RequestInfo]:
        """The gang's requests (those of an earlier gang of the same label: not its)."""
        owner = gang.owner.uid if gang.owner is not None else ""
        found = (self.requests or {}).get(gang.key, [])
        return [r for r in found if r.owner_uid == owner]

    def provisioned(self, gang: GangObservation) -> RequestInfo | None:
        """The gang's latest request, if cluster-autoscaler provisioned it."""
        if not self._by_request(gang):
            return None
        latest = current(self._requests_of(gang))
        if latest is None or outcome(latest, self.config.autoscaling).state != "provisioned":
            return None
        return latest

    def consume(self, gang: GangObservation) -> dict[str, str]:
        """The gang is released this pass: the annotations that make its members consume
        its provisioned request (kept with them); {} when it has none."""
        latest = self.provisioned(gang)
        if latest is None:
            return {}
        self.kept.add(latest.uid)
        return consume_annotations(latest)

    def request_orphans(self, gangs: Iterable[GangObservation]) -> tuple[RequestInfo, ...]:
        """Requests no gang of this pass keeps: deleted (see `provisioning.orphans`)."""
        present = {g.key: (g.owner.uid if g.owner is not None else "") for g in gangs}
        every = [r for found in (self.requests or {}).values() for r in found]
        return orphans(every, present, self.kept, self.config.autoscaling)

    def orphans(self) -> tuple[PodInfo, ...]:
        """Placeholders no gang of this pass keeps: deleted."""
        return tuple(
            pod
            for key, pods in sorted(self.by_gang.items())
            if key not in self.handled
            for pod in pods.values()
        )

    # -- the decision ---------------------------------------------------------------------

    def _pools(self, placements: Sequence[Placement]) -> set[str]:
        """Declared pools some of these placements may use."""
        return {
            pool.name
            for pool in self.config.pools
            for placement in placements
            if node_eligible(placement, node_name="", labels=pool.labels, taints=pool.taints)
        }

    def consider(
        self, gang: GangObservation, fleet: Fleet, could_fit: bool
    ) -> tuple[str, str] | None:
        """Decide the asking gang's placeholders; (code, reason suffix) or None when the
        gang does not ask (its placeholders, if any, are then orphans and deleted)."""
        settings = self.config.autoscaling
        if settings.mode_for(gang.namespace) == "off":
            return None
        gated = [m for m in gang.gated if m.demand]
        if not gated:
            return None
        pools = self._pools(sorted({m.placement for m in gated}, key=repr))
        if not pools:
            # Undeclared pools have no known maximum: the autoscaler is the judge.
            if not settings.cluster_autoscales:
                return None
            pools, could_fit = {ANY_POOL}, True
        if not could_fit:
            return None
        self.clocked = True
        decision = None
        if self._by_request(gang):
            decision = decide(gang, self._requests_of(gang), settings, self.now)
            if not decision.asking:  # gave up: keeps its request, claims nothing
                self._keep(decision.ask)
                return "gave-up", decision.reason
        blocker = next(
            (
                g
                for name, g in self.claimed.items()
                if name in pools or name == ANY_POOL or ANY_POOL in pools
            ),
            None,
        )
        if blocker is not None:
            return "held", (
                f"; {blocker.namespace}/{blocker.name}, which came first, is asking the "
                "autoscaler for nodes of the same pool"
            )
        for name in pools:
            self.claimed[name] = gang
        if decision is not None:
            self._keep(decision.ask)
            return "provisioning", decision.reason
        self.handled.add(gang.key)
        own = self.by_gang.get(gang.key, {})
        retry = self.backoff.get(gang_key(gang))
        if retry is not None and self.now < retry[1]:
            if own:  # the timed-out ask's, not gone from the cache yet
                self.asks.append(Ask(gang, (), tuple(own.values()), 0, 0))
            wait = retry[1] - self.now
            return "provisioning", (
                f"; the autoscaler gave no room for it {retry[0]} time(s), asking again in "
                f"{wait:.0f}s"
            )
        needers = self._without_room(gated, fleet)
        wanted = {placeholder_name(m.name): m for m in needers}
        timeout = settings.provisioning_timeout_seconds
        started = min((p.created for p in own.values()), default=self.now)
        age = max(0.0, self.now - started)
        bound = sum(1 for name, p in own.items() if p.bound and name in wanted)
        if own and age >= timeout:
            attempts = (retry or (0, 0.0))[0] + 1
            wait = settings.backoff_seconds(attempts)
            note = (
                f"{bound} of {len(own)} members' nodes came in {timeout} s; placeholders "
                f"removed, asking again in {wait} s"
            )
            self.asks.append(
                Ask(gang, (), tuple(own.values()), 0, bound, timed_out=note,
                    attempts=attempts, retry_at=self.now + wait)
            )
            return "provisioning", f"; {note}"
        create = tuple(m for name, m in wanted.items() if name not in own)
        delete = tuple(p for name, p in own.items() if name not in wanted)
        self.asks.append(Ask(gang, create, delete, len(wanted), bound))
        return "provisioning", (
            f"; asked the autoscaler for room: {bound} of {len(wanted)} placeholders bound "
            f"({age:.0f} of {timeout} s)"
        )

    def _keep(self, ask: RequestAsk) -> None:
        self.request_asks.append(ask)
        dropped = {r.uid for r in ask.delete}
        self.kept |= {r.uid for r in self._requests_of(ask.gang) if r.uid not in dropped}

    @staticmethod
    def _without_room(members: Sequence[PodInfo], fleet: Fleet) -> list[PodInfo]:
        """The members that have no room now, first-fit in arrival order (trial only)."""
        placed: list[tuple[PodInfo, str]] = []
        without: list[PodInfo] = []
        for member in sorted(members, key=lambda m: (m.created, m.name)):
            node = fleet.place(member)
            if node is None:
                without.append(member)
            else:
                placed.append((member, node))
        for member, node in placed:
            fleet.unplace(member.uid, node, member.demand, member.requests)
        return without
