"""Read gangs back from the pods the API server holds: the controller's only state.

`pod_info(pod, config)` reduces one pod (a plain dict, as listed or watched) to the
facts the controller and `gangkeeper status` need; `observe_gangs(pods)` groups the
gang pods into `GangObservation`s in arrival order. Everything is recomputed from the
API objects, never remembered, so a restarted (or newly elected) controller sees the
same gangs its predecessor saw.

`PodInfo` is what a cluster's worth of pods costs in the controller's memory, so it is
kept small: slotted, with equal immutable parts (namespace and node names, GPU demand,
placement, the empty label map) shared between pods (`shared_parts.SharedParts`, bounded,
owned by the controller) rather than copied per pod. The later-members annotation is read
in `later_members`.

Pure: plain dicts in, frozen dataclasses out. No I/O, no kubernetes import.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from types import MappingProxyType
from typing import Any, cast, get_args

from .. import names
from ..amounts import plus
from ..assigner.constraints import unmodeled
from ..assigner.pin import affinity_levels, pin_of
from ..errors import InvalidObject
from ..model import Backend, Placement
from ..podspec import placement_of, pod_demand, pod_requests
from ..settings.config import Config
from .later_members import LaterMembers, parse_later
from .shared_parts import SharedParts

_BACKENDS: tuple[str, ...] = get_args(Backend)
_TERMINAL = ("Succeeded", "Failed")

_NO_LABELS: Mapping[str, str] = MappingProxyType({})
#: A pod whose claims may take nothing beyond their count (most): one shared empty map.
_NO_EXTRA: Mapping[str, int] = MappingProxyType({})


def _later(raw: object, shared: SharedParts | None) -> tuple[LaterMembers, ...] | str:
    """The later members an annotation value lists, or why it cannot be read."""
    if raw is None:
        return ()
    if not isinstance(raw, str):
        return f"annotation {names.LATER_ANNOTATION} is not a string"
    return shared.later(raw) if shared is not None else parse_later(raw)


@dataclass(frozen=True)
class Owner:
    """The gang's top-level owner, from the `gangkeeper.io/owner` annotation."""

    api_version: str
    kind: str
    name: str
    uid: str

    def reference(self) -> dict[str, Any]:
        """An ownerReference, so a PodGroup is garbage-collected with the owner."""
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": False,
            "blockOwnerDeletion": False,
        }


@dataclass(frozen=True, slots=True)
class PodInfo:
    """What the controller needs from one live pod (gang member or not)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    #: creationTimestamp in seconds since the epoch (0 when absent).
    created: float
    #: `spec.nodeName`; empty while the pod is not bound.
    node_name: str
    #: Every scheduling gate, in order (ours and others').
    gates: tuple[str, ...]
    #: Effective GPU demand per resource; empty when none or unreadable.
    demand: Mapping[str, int]
    placement: Placement
    #: Effective requests of every resource the scheduler checks, `pods` included
    #: (`podspec.pod_requests`); empty when unreadable.
    requests: Mapping[str, int] = field(default_factory=dict)
    #: Why the pod cannot be pinned (`placement.unmodeled`); "" when it can.
    unpinnable: str = ""
    #: Devices its DRA claims may take beyond `requests` (firstAvailable alternatives
    #: larger than the smallest, `dra.pinnable.Pinning.extra`): a pin must fit them too.
    pin_extra: Mapping[str, int] = field(default_factory=dict)
    #: Shared ResourceClaims it names that the release pins its sharers together by:
    #: (name, the node its allocation names or "" before, its devices while not
    #: allocated, asked once for all sharers; `dra.pinnable.Pinning.shared`).
    shared_claims: tuple[tuple[str, str, Mapping[str, int]], ...] = ()
    #: How much of the path to required node affinity the spec has
    #: (`pin.affinity_levels`): where the pin patch writes. 0 for a non-member.
    affinity_levels: int = 0
    #: `spec.priority` (set from the PriorityClass at creation); 0 when absent.
    priority: int = 0
    #: `spec.priorityClassName`; "" when absent. A native PodGroup names it too.
    priority_class: str = ""
    #: When gangkeeper lifted its gate and pinned it (`names.RELEASED_AT_ANNOTATION`,
    #: epoch seconds); 0 when not released pinned.
    released_at: float = 0.0
    #: The Ready condition is True.
    ready: bool = False
    #: The scheduler tried and found no node: PodScheduled False, reason Unschedulable
    #: (a pod it has not tried yet still shows SchedulingGated, or no condition).
    unschedulable: bool = False
    #: ("required" | "preferred", node label key) from the topology annotations.
    topology: tuple[str, str] | tuple[()] = ()
    #: Why demand/placement could not be read ("" when fine).
    problem: str = ""
    #: The gang label value; "" for a pod that is not a gang member.
    gang: str = ""
    role: str = ""
    gang_name: str = ""
    min_member: int | None = None
    backend: str = ""
    owner: Owner | None = None
    #: The scheduler's group name the pod points at (coscheduling label, volcano
    #: annotation or native `spec.schedulingGroup.podGroupName`); "" when none.
    group_name: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Has a deletionTimestamp: still holds GPUs, no longer a member.
    deleting: bool = False
    #: The gang's members that arrive only after release (annotation), or why the
    #: annotation cannot be read.
    later: tuple[LaterMembers, ...] | str = ()
    #: For a placeholder pod (`policies.autoscaling`): the label of the gang it holds
    #: room for; "" for any other pod.
    placeholder_for: str = ""
    #: `spec.preemptionPolicy` (set from the PriorityClass at creation: `Never` or
    #: `PreemptLowerPriority`); "" when absent, which means the latter.
    preemption_policy: str = ""
    #: `status.startTime` in epoch seconds (0 when not started): preemption prefers
    #: victims that started last, as kube-scheduler does.
    started: float = 0.0

    @property
    def gated(self) -> bool:
        """Carries gangkeeper's gate (other systems' gates do not count)."""
        return names.GATE in self.gates

    @property
    def bound(self) -> bool:
        return bool(self.node_name)

    @property
    def in_flight(self) -> bool:
        """Free to be scheduled but not bound yet: it will take capacity soon."""
        return not self.gates and not self.node_name and not self.deleting


def flight_order(pod: PodInfo) -> tuple[float, str, str, str]:
    """The order pods in flight are placed in at a pass's start, oldest first. Total
    (uids are unique), so a pass decides the same whatever order its caller lists the
    pods in, and a kept start (`KeptFleet`) needs no memory of that order."""
    return (pod.created, pod.name, pod.namespace, pod.uid)


def parse_time(value: object) -> float:
    """RFC 3339 timestamp (as the API server writes it) to epoch seconds; 0 if absent."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _owner(raw: object) -> Owner | None:
    if not isinstance(raw, str):
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    values = [data.get(k) for k in ("apiVersion", "kind", "name", "uid")]
    if not all(isinstance(v, str) and v for v in values):
        return None
    api_version, kind, name, uid = cast(list[str], values)
    return Owner(api_version=api_version, kind=kind, name=name, uid=uid)


def _min_member(raw: object) -> int | None:
    if not isinstance(raw, str) or not raw.strip().isdigit():
        return None
    value = int(raw.strip())
    return value if value >= 1 else None


def _str_map(raw: object) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): str(v) for k, v in raw.items()}


def _topology(annotations: Mapping[str, str]) -> tuple[str, str] | tuple[()]:
    for mode, key in (
        ("required", names.TOPOLOGY_REQUIRED_ANNOTATION),
        ("preferred", names.TOPOLOGY_PREFERRED_ANNOTATION),
    ):
        if annotations.get(key):
            return (mode, annotations[key])
    return ()


def _ready(status: object) -> bool:
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions or ()
    )


def _unschedulable(status: object) -> bool:
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return any(
        isinstance(c, Mapping) and c.get("type") == "PodScheduled"
        and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in conditions or ()
    )


def is_live(pod: Mapping[str, Any]) -> bool:
    """Not finished: the pod holds or will hold capacity.

    A pod being deleted is still live: its node keeps its GPUs (and the scheduler
    counts them) until the pod is gone. It is no longer a gang member, though.
    """
    status = pod.get("status") or {}
    return status.get("phase") not in _TERMINAL


def pod_info(
    pod: Mapping[str, Any],
    config: Config,
    shared: SharedParts | None = None,
    *,
    claims: str | None = None,
    pin_extra: Mapping[str, int] | None = None,
    shared_claims: tuple[tuple[str, str, Mapping[str, int]], ...] = (),
) -> PodInfo:
    """Reduce a pod dict to `PodInfo`; a malformed spec is recorded, never raised.

    With `shared`, equal demands and placements are one object across pods. `claims`:
    the pod's DRA claims were counted as its requests, and why that count cannot place
    them ("" when it can; `assigner.constraints.unmodeled`); None when not counted.
    `pin_extra`: what they may take beyond that count (`PodInfo.pin_extra`);
    `shared_claims`: `PodInfo.shared_claims`.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    gates = tuple(
        str(g.get("name", "")) for g in spec.get("schedulingGates") or [] if isinstance(g, dict)
    )
    problem = ""
    demand: dict[str, int] = {}
    requests: dict[str, int] = {}
    placement = Placement()
    try:
        demand = pod_demand(spec, config)
        requests = pod_requests(spec, config)
        placement = placement_of(spec)
    except InvalidObject as err:
        problem = str(err)
    if pin_extra and names.GATE not in gates and not spec.get("nodeName"):
        # Released and not bound: which firstAvailable alternative the allocator will
        # take is not known yet, so its largest is counted where it is pinned (the
        # release placed it so); once bound, its requests again.
        demand = plus(demand, pin_extra)
        requests = plus(requests, pin_extra)
    priority = spec.get("priority")
    gang = labels.get(names.GANG_LABEL, "")
    scheduling_group = spec.get("schedulingGroup") or {}
    group_name = (
        labels.get(names.COSCHEDULING_GROUP_LABEL)
        or annotations.get(names.VOLCANO_GROUP_ANNOTATION)
        or (scheduling_group.get("podGroupName") if isinstance(scheduling_group, dict) else "")
        or ""
    )
    return PodInfo(
        namespace=sys.intern(str(meta.get("namespace", ""))),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        created=parse_time(meta.get("creationTimestamp")),
        node_name=sys.intern(str(spec.get("nodeName") or "")),
        gates=gates,
        demand=shared.demand(demand) if shared else MappingProxyType(demand),
        placement=shared.placement(placement) if shared else placement,
        requests=shared.demand(requests) if shared else MappingProxyType(requests),
        unpinnable=unmodeled(spec, claims) if gang else "",
        pin_extra=MappingProxyType(dict(pin_extra)) if gang and pin_extra else _NO_EXTRA,
        shared_claims=shared_claims if gang else (),
        affinity_levels=affinity_levels(spec) if gang else 0,
        priority=priority if type(priority) is int else 0,
        priority_class=sys.intern(str(spec.get("priorityClassName") or "")) if gang else "",
        released_at=parse_time(annotations.get(names.RELEASED_AT_ANNOTATION)) if gang else 0.0,
        ready=_ready(pod.get("status")) if gang else False,
        unschedulable=_unschedulable(pod.get("status")) if gang else False,
        topology=_topology(annotations) if gang else (),
        problem=problem,
        gang=gang,
        role=labels.get(names.ROLE_LABEL, ""),
        gang_name=annotations.get(names.GANG_NAME_ANNOTATION, gang),
        min_member=_min_member(annotations.get(names.MIN_MEMBER_ANNOTATION)),
        backend=annotations.get(names.BACKEND_ANNOTATION, ""),
        owner=_owner(annotations.get(names.OWNER_ANNOTATION)),
        group_name=str(group_name),
        # Gang members' labels are read for their gang; a bound pod's for the
        # PodDisruptionBudgets that may cover it (a preemption victim). Other pods
        # share one empty map.
        labels=labels if gang or (labels and spec.get("nodeName")) else _NO_LABELS,
        deleting=bool(meta.get("deletionTimestamp")),
        later=_later(annotations.get(names.LATER_ANNOTATION), shared) if gang else (),
        # A placeholder is never a member, whatever labels it was given.
        placeholder_for="" if gang else labels.get(names.PLACEHOLDER_LABEL, ""),
        preemption_policy=str(spec.get("preemptionPolicy") or "") if gang else "",
        started=parse_time((pod.get("status") or {}).get("startTime")),
    )


def same_for_planning(old: PodInfo, new: PodInfo) -> bool:
    """Equal but for resourceVersion: no plan can differ, so no re-plan is needed.

    Most pod updates are status-only (the scheduler's conditions on a gated or pending
    pod, the kubelet's container states): they change nothing `PodInfo` keeps.
    """
    return old == replace(new, resource_version=old.resource_version)


def matters(info: PodInfo) -> bool:
    """Whether a plan can depend on this pod: a gang member, one that wants GPUs, or
    one that takes room on a known node (bound, or in flight with a pin):
    placement counts its cpu, memory and pod slot there.

    Any other pod takes nothing a plan can place (an unbound pod without GPUs may go
    to any node, most likely one without GPUs), so the controller need not keep it.
    """
    pinned = info.in_flight and pin_of(info.placement) is not None
    return bool(info.gang or info.demand or info.node_name or pinned or info.placeholder_for)


@dataclass(frozen=True)
class GangObservation:
    """One gang as its live member pods show it right now."""

    namespace: str
    #: The gang label value (also the PodGroup name for the scheduler backends).
    label: str
    #: The full gang name (annotation), for messages.
    name: str
    #: None when no member carries a readable `gangkeeper.io/min-member`.
    min_member: int | None
    backend: Backend
    owner: Owner | None
    #: Live members, oldest first.
    members: tuple[PodInfo, ...]
    #: Creation time of the oldest live member: the gang's place in the queue.
    arrived: float
    #: Why the gang cannot be judged (bad annotation, unreadable member); "" if fine.
    problem: str = ""
    #: Members that arrive only after release (`LaterMembers`).
    later: tuple[LaterMembers, ...] = ()
    #: The highest `spec.priority` of its members: its place in the queue, before age.
    priority: int = 0

    @cached_property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.label)

    @cached_property
    def order(self) -> tuple[int, float, str, str]:
        """Its place in a pass (`gang_order`)."""
        return (-self.priority, self.arrived, self.namespace, self.label)

    @property
    def later_count(self) -> int:
        return sum(entry.count for entry in self.later)

    @property
    def needed_before_release(self) -> int | None:
        """Members that must exist before release: minMember less the later ones."""
        if self.min_member is None:
            return None
        return max(1, self.min_member - self.later_count)

    @property
    def missing_later(self) -> int:
        """Later members still to come (each holds room until it arrives)."""
        if self.min_member is None or not self.later:
            return 0
        return max(0, self.min_member - self.present)

    def missing_later_members(self) -> list[tuple[LaterMembers, int]]:
        """The kinds of later members still to come, with how many of each: the last
        entries are the ones missing (members arrive in the order the roles start)."""
        missing = self.missing_later
        out: list[tuple[LaterMembers, int]] = []
        for entry in reversed(self.later):
            take = min(missing, entry.count)
            if take:
                out.append((entry, take))
            missing -= take
        return out

    @property
    def present(self) -> int:
        return len(self.members)

    # Read many times a pass (and, by a planner, pass after pass): counted once per
    # object, which never changes (frozen, its members frozen).
    @cached_property
    def gated(self) -> tuple[PodInfo, ...]:
        return tuple(m for m in self.members if m.gated)

    @cached_property
    def bound(self) -> int:
        return sum(1 for m in self.members if m.bound)

    def total_demand(self, members: Iterable[PodInfo] | None = None) -> dict[str, int]:
        total: dict[str, int] = {}
        for member in self.members if members is None else members:
            for resource, amount in member.demand.items():
                total[resource] = total.get(resource, 0) + amount
        return total


def gang_of(
    namespace: str, label: str, members: list[PodInfo], config: Config
) -> GangObservation:
    """One gang from its live members (any order; sorted here, oldest first)."""
    members.sort(key=lambda m: (m.created, m.name))
    problems: list[str] = []
    declared = {m.min_member for m in members if m.min_member is not None}
    # Members of one gang normally agree; if they do not, the larger value is the
    # safe one: releasing early would break all-or-nothing, waiting longer would not.
    min_member = max(declared) if declared else None
    if min_member is None:
        problems.append(
            f"no member carries a whole number ≥ 1 in annotation {names.MIN_MEMBER_ANNOTATION}"
        )
    backends = {m.backend for m in members if m.backend in _BACKENDS}
    backend = (
        cast(Backend, sorted(backends)[0]) if len(backends) == 1 else config.backend_for(namespace)
    )
    if len(backends) > 1:
        disagree = ", ".join(sorted(backends))
        problems.append(f"members disagree on {names.BACKEND_ANNOTATION}: {disagree}")
    unreadable = [m for m in members if m.problem]
    if unreadable:
        problems.append(f"pod {unreadable[0].name} cannot be read: {unreadable[0].problem}")
    owner = next((m.owner for m in members if m.owner is not None), None)
    name = next((m.gang_name for m in members if m.gang_name), label)
    later: tuple[LaterMembers, ...] = ()
    for member in members:
        if isinstance(member.later, str):
            problems.append(f"pod {member.name}: {member.later}")
            break
        if member.later:
            later = member.later
            break
    return GangObservation(
        namespace=namespace,
        label=label,
        name=name,
        min_member=min_member,
        backend=backend,
        owner=owner,
        members=tuple(members),
        arrived=members[0].created,
        problem="; ".join(problems),
        later=later,
        priority=max(m.priority for m in members),
    )


def observe_gangs(pods: Iterable[PodInfo], config: Config) -> list[GangObservation]:
    """Group live gang pods by (namespace, gang label): higher priority first (the
    PriorityClass value, as Kueue and Volcano order), then oldest first.

    Pods being deleted are left out: they will not run with the gang.
    """
    groups: dict[tuple[str, str], list[PodInfo]] = {}
    for pod in pods:
        if pod.gang and not pod.deleting:
            groups.setdefault((pod.namespace, pod.gang), []).append(pod)
    gangs = [gang_of(ns, label, members, config) for (ns, label), members in groups.items()]
    gangs.sort(key=gang_order)
    return gangs


def gang_order(gang: GangObservation) -> tuple[int, float, str, str]:
    """A gang's place in a pass: higher priority first, then oldest (unique per gang)."""
    return gang.order
