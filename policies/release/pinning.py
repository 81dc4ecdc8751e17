"""Release as a placement: the gate backend's gang, assigned node by node on the fleet.

`place_gang(gang, members, later, fleet)` asks the assigner (`policies.assigner`) for
a node for every gated member with GPU demand — and for every later member still to
come, whose room is held — over the fleet's nodes not held for an earlier gang, with what is free on
each after bound pods, pods in flight and the gangs released before in this pass.
A gang in which no member (nor later member) asks for GPUs is a gang too: every
member is assigned, over every node (with GPUs or not), by all it requests. In a gang
with GPU members, members without GPUs go unpinned (they may run on any node).
On success the members are placed on the fleet where the assignment says, so the next
gang in line sees them, and the pins (pod uid → node name, `assigner.pin`) are returned.

Topology (`gangkeeper.io/topology-required` / `-preferred` on the members, the key
listed in the config's `topology`): the gang is assigned inside one domain of that
node label, the fullest one that holds it first (so emptier domains stay whole for
the next gang), and waits when no domain can; preferred is packed into as few domains
as possible (`placement.domains`), and uses every node when no set of domains can
hold it.

DRA: a member's claims are its requests of `dra:<class>` devices (`dra.extended`), so it
is pinned where they are free like any other resource, when a count can place them
(`dra.pinnable`; otherwise its gang is released unpinned, with the reason). An All
request asks its node's one `dra:<class>/all`, and the assigner ties it to the node's
devices member by member (`assigner.whole_nodes`), so one gang never puts an All
member and another member of its class on one node. A request's own selectors are
counted per node (`dra:<class>#<hash>`). A node whose count of a class is unknown gets
a count no gang exhausts, and a node that mixes devices a request's selectors accept
with others of their class cannot promise which the allocator gives to whom; a gang
placed on either is released unpinned too (`_uncounted`), and the scheduler's allocator
decides.

`pins_for(placed, fleet)` turns nodes chosen elsewhere (first-fit for members beyond
minMember) into pins.

Pure: `PodInfo`s and the pass's `Fleet` in, frozen values out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..amounts import plus
from ..assigner.assign import (
    Assignment,
    Member,
    NodeView,
    NoRoom,
    Unpinned,
    assign,
    assign_groups,
    eligible,
)
from ..assigner.domains import fewest_domains
from ..assigner.whole_nodes import asks_devices
from ..cluster.fleet import Fleet
from ..cluster.later_members import LaterMembers
from ..cluster.node_facts import NodeFacts
from ..cluster.node_resources import shown
from ..cluster.observed_gangs import GangObservation, PodInfo
from ..dra.extended import PREFIX as DEVICE_PREFIX
from ..dra.extended import UNCOUNTED
from ..dra.resource_names import NARROWED, WHOLE, resource_text
from ..eligibility import uses_node_identity
from .shared_claims import Sharing, grouped


@dataclass(frozen=True)
class Pinned:
    """Pod uid → the name of the node it is pinned to."""

    pins: Mapping[str, str]
    #: Pod name → node name, for `gangkeeper status`.
    nodes: Mapping[str, str]


def _member(pod: PodInfo) -> Member:
    return Member(pod.name, pod.requests, pod.placement, pod.unpinnable)


def _later(entry: LaterMembers, index: int) -> Member:
    # A later member's pod does not exist yet: its demand is all that is known, and
    # it takes a pod slot.
    return Member(f"later-{index}", {**entry.demand, "pods": 1}, entry.placement)


def _domains(views: list[NodeView], key: str) -> list[list[NodeView]]:
    """The nodes of each domain of `key` (nodes without the label are in none), the
    domain with the least free first."""
    by_value: dict[str, list[NodeView]] = {}
    for view in views:
        if key in view.labels:
            by_value.setdefault(view.labels[key], []).append(view)
    return sorted(by_value.values(), key=lambda nodes: (sum(sum(n.free.values()) for n in nodes)))


def without_gpus(members: Iterable[PodInfo], later: Sequence[tuple[LaterMembers, int]]) -> bool:
    """Whether no member, nor any later member, asks for GPUs: the gang may use any node."""
    return not any(m.demand for m in members) and not any(e.demand for e, _ in later)


def _assign(
    gang: GangObservation, wanted: list[Member], fleet: Fleet, keys: Sequence[str], plain: bool
) -> Assignment | Unpinned | NoRoom:
    result = _search(gang, wanted, fleet, keys, plain)
    if isinstance(result, Assignment):
        return _uncounted(result, wanted, fleet) or result
    return result


def _uncounted(result: Assignment, wanted: Sequence[Member], fleet: Fleet) -> Unpinned | None:
    """Unpinned when a member's devices were placed on a node whose count of them is
    unknown (`dra.extended.UNCOUNTED`: partitionable, shared or tainted devices, a
    selector not evaluated here), or that mixes devices a member's own selectors accept
    with devices of their class they do not (`mixed_devices`): no pin can promise the
    allocator finds them there."""
    asked = {m.name: m.requests for m in wanted if asks_devices(m.requests)}
    for name, node in sorted(result.nodes.items()):
        if name not in asked:
            continue  # no device asked (most gangs: GPUs as extended resources)
        resource = uncounted_devices(asked[name], fleet.nodes[node])
        if resource:
            return Unpinned(f"node {node}'s {resource} devices cannot be counted "
                            f"(for {name}): the allocator places the gang")  # fmt: skip
        resource = mixed_devices(asked[name], fleet.nodes[node])
        if resource:
            return Unpinned(f"node {node} has {resource_text(resource)} and others of "
                            f"their class (for {name}): a request without those selectors "
                            "may be given either, so the allocator places the gang")  # fmt: skip
    return None


def uncounted_devices(requests: Mapping[str, int], node: NodeFacts) -> str:
    """The first DRA device resource of `requests` whose count on `node` is unknown;
    "" when there is none."""
    return next((r for r in sorted(requests) if r.startswith(DEVICE_PREFIX)
                 and node.allocatable.get(r) == UNCOUNTED), "")  # fmt: skip


def mixed_devices(requests: Mapping[str, int], node: NodeFacts) -> str:
    """The first narrowed device resource of `requests` (`dra:<class>#<hash>`, a
    request's own selectors) of which `node` offers fewer than of its class; "" when
    there is none. On such a node a pod asking the class alone may be given the
    devices the selectors accept (the allocator takes any), and a count of them
    cannot promise they stay free; on a node whose devices of the class all match,
    the class's count answers for them."""
    for resource in sorted(requests):
        if not resource.startswith(DEVICE_PREFIX) or NARROWED not in resource:
            continue
        key = resource.removesuffix(WHOLE)
        device_class = key.partition(NARROWED)[0]
        if node.allocatable.get(device_class, 0) > node.allocatable.get(key, 0):
            return key
    return ""


def _search(
    gang: GangObservation, wanted: list[Member], fleet: Fleet, keys: Sequence[str], plain: bool
) -> Assignment | Unpinned | NoRoom:
    topology = next((m.topology for m in gang.members if m.topology), ())
    if not topology or topology[1] not in keys:
        identity = fleet.identity_labels
        if not any(uses_node_identity(m.placement, identity) for m in wanted):
            # The fleet's groups are the nodes as the assigner would group them.
            groups, names = fleet.groups(plain=plain)
            return assign_groups(wanted, groups, names)
        return assign(wanted, fleet.views(plain=plain))
    views = fleet.views(plain=plain)
    mode, key = topology
    if mode == "preferred":
        packed = fewest_domains(wanted, views, key)
        return packed if not isinstance(packed, NoRoom) else assign(wanted, views)
    for nodes in _domains(views, key):
        result = assign(wanted, nodes)
        if not isinstance(result, NoRoom):
            return result
    return NoRoom(f"no single {key} domain has room for all {len(wanted)} members now")


def _wanted(
    members: Sequence[PodInfo], later: Sequence[tuple[LaterMembers, int]]
) -> tuple[dict[str, PodInfo], list[Member], dict[str, LaterMembers], bool]:
    """The pods to assign by name, the assigner's members (later ones included), each
    later member's entry by name, and whether the gang has no GPUs at all."""
    # In a GPU gang, members without GPUs (a launcher, a head) go unpinned and the
    # scheduler places them; a gang without GPUs at all is placed by what it requests.
    plain = without_gpus(members, later)
    # A member asking devices through a shared claim only is placed with the others
    # sharing it (`shared_claims`): its claim's node is theirs.
    pods = {m.name: m for m in members
            if not m.node_name and (m.demand or plain or m.shared_claims)}
    wanted = [_member(p) for p in pods.values()]
    held: dict[str, LaterMembers] = {}
    for entry, count in later:
        for _ in range(count):
            placeholder = _later(entry, len(held))
            held[placeholder.name] = entry
            wanted.append(placeholder)
    return pods, wanted, held, plain


def _assign_all(
    gang: GangObservation, pods: Mapping[str, PodInfo], wanted: list[Member], fleet: Fleet,
    *, keys: Sequence[str], plain: bool,
) -> tuple[Assignment | Unpinned | NoRoom, Mapping[str, Sharing]]:
    """`_assign`, with the members that share ResourceClaims assigned as one
    (`shared_claims.grouped`: one node for them all) and members whose claims may take
    more than their count (`PodInfo.pin_extra`: firstAvailable alternatives) asking
    that too, so whichever alternative the allocator takes fits beside the rest. When
    the gang fits member by member by its count alone, it is released unpinned, and the
    allocator places it. The groups of sharers come back with an assignment."""
    shared = grouped(pods, wanted)
    if isinstance(shared, str):
        return _unpinned_if_fits(gang, wanted, fleet, shared, keys=keys, plain=plain), {}
    members, sharing = shared
    extra: dict[str, dict[str, int]] = {}
    for member in members if any(p.pin_extra for p in pods.values()) else ():
        names = sharing[member.name].members if member.name in sharing else (member.name,)
        total: Counter[str] = Counter()
        for name in names:
            if name in pods:
                total.update(pods[name].pin_extra)
        if total:
            extra[member.name] = dict(total)
    asked = [m if m.name not in extra else Member(
        m.name, plus(m.requests, extra[m.name]), m.placement, m.unmodeled) for m in members]
    result = _assign(gang, asked, fleet, keys, plain)
    if not isinstance(result, NoRoom) or (not extra and not sharing):
        return result, sharing
    if extra:
        name = sorted(extra)[0]
        more = ", ".join(f"{n} more {resource_text(r)}" for r, n in sorted(extra[name].items()))
        why = (f"{name}'s firstAvailable alternatives may take up to {more} than its "
               "smallest, which do not fit beside the gang now")  # fmt: skip
    else:
        first = next(iter(sharing.values()))
        why = (f"the {len(first.members)} members sharing ResourceClaim {first.claims[0]} "
               "and its devices fit on no single node now")  # fmt: skip
    return _unpinned_if_fits(gang, wanted, fleet, f"{why}: the allocator places the gang",
                             keys=keys, plain=plain), {}  # fmt: skip


def _unpinned_if_fits(gang: GangObservation, wanted: list[Member], fleet: Fleet, why: str,
                      *, keys: Sequence[str], plain: bool,
                      ) -> Assignment | Unpinned | NoRoom:  # fmt: skip
    """Unpinned(`why`) when the members fit one by one as counted; else what the
    assigner says."""
    counted = _assign(gang, wanted, fleet, keys, plain)
    return Unpinned(why) if isinstance(counted, Assignment) else counted


def try_place(
    gang: GangObservation,
    members: Sequence[PodInfo],
    later: Sequence[tuple[LaterMembers, int]],
    fleet: Fleet,
    topology_keys: Sequence[str] = (),
) -> Assignment | Unpinned | NoRoom:
    """What `place_gang` would find now, placing nothing (preemption asks it of the
    fleet with candidate victims taken away)."""
    pods, wanted, _, plain = _wanted(members, later)
    return _assign_all(gang, pods, wanted, fleet, keys=topology_keys, plain=plain)[0]


def place_gang(
    gang: GangObservation,
    members: Sequence[PodInfo],
    later: Sequence[tuple[LaterMembers, int]],
    fleet: Fleet,
    topology_keys: Sequence[str] = (),
) -> Pinned | Unpinned | NoRoom:
    """Assign and place `members` (and room for `later`); see the module docstring."""
    pods, wanted, held, plain = _wanted(members, later)
    result, sharing = _assign_all(gang, pods, wanted, fleet, keys=topology_keys, plain=plain)
    if isinstance(result, NoRoom):
        return NoRoom(f"{result.reason}{_short(wanted, fleet, plain)}")
    if not isinstance(result, Assignment):
        return result
    pins: dict[str, str] = {}
    nodes: dict[str, str] = {}
    placed: list[tuple[str, str, Mapping[str, int], Mapping[str, int] | None]] = []
    for name, node in result.nodes.items():
        if name not in pods:
            entry = held[name]
            uid = f"later:{gang.namespace}/{gang.label}/{name}"
            placed.append((uid, node, entry.demand, {**entry.demand, "pods": 1}))
            continue
        group = sharing.get(name)
        for member in group.members if group else (name,):
            pod = pods[member]
            # Pinned with its claims' largest alternatives: placed with them too, so
            # the next gang in the pass does not count on devices the allocator may
            # give it.
            extra = pod.pin_extra
            placed.append((pod.uid, node, plus(pod.demand, extra) if extra else pod.demand,
                           plus(pod.requests, extra) if extra else pod.requests))
            pins[pod.uid] = node
            nodes[pod.name] = node
        if group and group.devices:
            # The shared claims' devices, allocated on this node with its first pod.
            uid = f"resourceclaims:{gang.namespace}/{','.join(group.claims)}"
            placed.append((uid, node, group.devices, group.devices))
    fleet.add_all(placed)
    return Pinned(pins, nodes)


def _short(wanted: Sequence[Member], fleet: Fleet, plain: bool) -> str:
    """The resources the members ask for more of than is free on the nodes they may use,
    with numbers ("cpu: 8 cpu asked, 4 free"), or "" when each total would fit."""
    views = fleet.views(plain=plain)
    parts: list[str] = []
    for resource in sorted({r for m in wanted for r, a in m.requests.items() if a > 0}):
        need = sum(m.requests.get(resource, 0) for m in wanted)
        names = {v.name for m in wanted for v in views if eligible(m, v)}
        free = sum(v.free.get(resource, 0) for v in views if v.name in names)
        if need > free:
            parts.append(f"{shown(resource, need)} asked, {shown(resource, free)} free")
    return f" ({'; '.join(parts)} on the nodes they may use)" if parts else ""


def pins_for(placed: Iterable[tuple[PodInfo, str | None]], fleet: Fleet) -> Pinned:
    """Pins for pods the fleet placed first-fit (`Fleet.place(..., pinnable=True)`)."""
    pins: dict[str, str] = {}
    nodes: dict[str, str] = {}
    for pod, node in placed:
        # A member the assigner would not pin (`_uncounted`, `Member.unmodeled`) is not
        # pinned where first-fit put it either.
        if node is None:
            continue
        facts = fleet.nodes[node]
        if pod.unpinnable or pod.pin_extra or pod.shared_claims or uncounted_devices(
                pod.requests, facts) or mixed_devices(pod.requests, facts):
            # First-fit counted neither what firstAvailable may take (pin_extra) nor
            # that the pods sharing a claim must share its node.
            continue
        pins[pod.uid] = node
        nodes[pod.name] = node
    return Pinned(pins, nodes)
