"""Pod-based gangs summed over the members seen together, and the warning about the rest.

A gang known only from its pods (explicit `gangkeeper.io/gang-name` + `min-member`
annotations on bare pods, Kueue's `pod-group-name` + `pod-group-total-count`) has no
workload object that says what every member needs. Each pod alone is a member plus
`minMember - 1` unseen ones. Members seen together are one gang:

- `summed(...)` turns the membership of the pod under review into the gang of every
  member seen: the pod, plus its siblings (in `gangkeeper check`, the pods of the gang
  in the input; in the webhook, those already in its cache). Members still unseen
  count towards minMember and demand nothing, so no verdict rests on a guess.
- `unseen_warning(gang, capacity)` says, with the numbers, when minMember members
  like the ones seen (each like the smallest seen member) could not be packed even on
  the empty cluster: the gang is admitted, but would wait for ever if the others are
  like these.

Pure: pods as plain dicts in, frozen dataclasses and text out. The siblings come from
the caller (a `PodsLookup`); nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from ..cluster.capacity import Capacity
from ..dra.resource_names import resource_text
from ..errors import PolicyError
from ..fit.feasibility import check_gang
from ..fit.warning_text import fit_warning
from ..memo import BoundedMemo
from ..model import JSON_OBJECT, Gang, KubeObject, Placement, PodMembership, PodsLookup, Role
from ..names import GANG_NAME_ANNOTATION as GANG_NAME
from ..podspec import other_requests, placement_of, pod_demand
from ..settings.config import Config
from .common import UNSEEN_ROLE
from .kueue import GROUP_LABEL as KUEUE_GROUP_LABEL

#: Registry names of the recognisers whose gangs are known from pods alone.
POD_BASED = frozenset({"annotations", "kueue-podgroup"})
#: The role of unseen members, as the recognisers name it.
UNSEEN = UNSEEN_ROLE
#: Siblings read per admission at most: summing is linear in them, and pod-based
#: gangs are small; beyond this the rest count as unseen (never a false rejection).
MAX_SIBLINGS = 2_000

#: Given a candidate sibling pod, its membership as the same recogniser reads it.
Recognise = Callable[[KubeObject], PodMembership | None]

#: A member's shape: its GPU demand, its other requests (cpu, memory, ...; what
#: `Role.requests` holds) and its placement. Members of one shape form one role.
Shape = tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...], Placement]
#: What summing needs of one sibling: its gang (namespace, name, recogniser) or None
#: when it is in none (or cannot be read), and its shape.
SiblingFact = tuple[tuple[str, str, str] | None, Shape]
_NO_SHAPE: Shape = ((), (), Placement())
#: Sibling facts by (uid, resourceVersion, recogniser) with the config they were read
#: under: every admission of a pod-based gang reads every member seen so far, so
#: without this a gang of n pods costs n^2 recognitions (a 1,000-pod gang took over
#: 300 ms per admission and the API server's webhook calls timed out).
SiblingFacts = BoundedMemo[tuple[str, str, str], tuple[Config, SiblingFact]]
#: Sibling facts remembered by a server (`decision.Memos`): a cache's pods in
#: pod-based gangs, at about 200 bytes each.
SIBLING_FACTS = 50_000


def _key(pod: KubeObject) -> tuple[str, str]:
    metadata = pod.get("metadata")
    if not isinstance(metadata, JSON_OBJECT):
        return ("", "")
    uid, name = metadata.get("uid"), metadata.get("name")
    return (uid if isinstance(uid, str) else "", name if isinstance(name, str) else "")


def _finished_or_leaving(pod: KubeObject) -> bool:
    metadata = pod.get("metadata")
    status = pod.get("status")
    deleting = isinstance(metadata, JSON_OBJECT) and bool(metadata.get("deletionTimestamp"))
    phase = status.get("phase") if isinstance(status, JSON_OBJECT) else None
    return deleting or phase in ("Succeeded", "Failed")


def _fact(sibling: KubeObject, recognise: Recognise, config: Config) -> SiblingFact:
    try:
        other = recognise(sibling)
        if other is None:
            return (None, _NO_SHAPE)
        spec = sibling.get("spec")
        demand = tuple(sorted(pod_demand(spec, config).items()))
        requests = tuple(sorted(other_requests(spec, config).items()))
        identity = (other.gang.namespace, other.gang.name, other.gang.recognizer)
        return (identity, (demand, requests, placement_of(spec)))
    except PolicyError:
        return (None, _NO_SHAPE)  # an unreadable sibling is simply not seen


def _version(pod: KubeObject) -> str:
    metadata = pod.get("metadata")
    version = metadata.get("resourceVersion") if isinstance(metadata, JSON_OBJECT) else None
    return version if isinstance(version, str) else ""


def summed(
    membership: PodMembership,
    pod: KubeObject,
    siblings: Sequence[KubeObject],
    recognise: Recognise,
    config: Config,
    *,
    facts: SiblingFacts | None = None,
    recognizer: str = "",
) -> PodMembership:
    """The gang of every member seen: `pod` plus those `siblings` of the same gang.

    A sibling counts when the same recogniser puts it in a gang of the same namespace
    and name; the pod itself (same uid or name), pods being deleted or finished, and
    pods that cannot be read are left out. Members of one shape (demand and
    placement, cpu, memory and the other requests the scheduler checks) form one
    role; the pod's own shape keeps the pod's role name.
    `facts` (the server's memo) remembers what each sibling version gave, for the
    recogniser named `recognizer`.
    """
    gang = membership.gang
    identity = (gang.namespace, gang.name, gang.recognizer)
    own_uid, own_name = _key(pod)
    uids, names = {own_uid} - {""}, {own_name} - {""}
    shapes_seen: list[Shape] = []
    for sibling in siblings[:MAX_SIBLINGS]:
        if not isinstance(sibling, JSON_OBJECT) or _finished_or_leaving(sibling):
            continue
        uid, name = _key(sibling)
        if uid in uids or name in names:
            continue
        version = _version(sibling)
        memo_key = (uid, version, recognizer)
        remembered = facts.get(memo_key) if facts is not None and uid and version else None
        if remembered is not None and remembered[0] is config:
            fact = remembered[1]
        else:
            fact = _fact(sibling, recognise, config)
            if facts is not None and uid and version:
                facts.put(memo_key, (config, fact))
        if fact[0] != identity:
            continue
        shapes_seen.append(fact[1])
        if uid:
            uids.add(uid)
        if name:
            names.add(name)
    if not shapes_seen:
        return membership
    own_role = next(r for r in gang.roles if r.name == membership.role)
    own: Shape = (tuple(sorted(own_role.demand.items())),
                  tuple(sorted(own_role.requests.items())), own_role.placement)
    shapes: dict[Shape, int] = {own: 1}
    for shape in shapes_seen:
        shapes[shape] = shapes.get(shape, 0) + 1
    roles: list[Role] = []
    for index, ((demand_items, request_items, placement), count) in enumerate(shapes.items()):
        name = membership.role if index == 0 else f"{membership.role}-{index + 1}"
        roles.append(Role(name, count, dict(demand_items), placement,
                          requests=dict(request_items)))
    present = 1 + len(shapes_seen)
    if gang.min_member > present:
        roles.append(Role(UNSEEN, gang.min_member - present, {}))
    return PodMembership(replace(gang, roles=tuple(roles)), membership.role)


def siblings_among(objects: Iterable[KubeObject]) -> PodsLookup:
    """A PodsLookup over the Pods among `objects` (files given to `check`, the owner
    manifests of a server without a cluster): each found by the gang it names."""
    by_gang: dict[tuple[str, str], list[KubeObject]] = {}
    for obj in objects:
        if not isinstance(obj, JSON_OBJECT) or (obj.get("apiVersion"), obj.get("kind")) != (
            "v1",
            "Pod",
        ):
            continue
        meta = obj.get("metadata")
        if not isinstance(meta, JSON_OBJECT):
            continue
        namespace = meta.get("namespace") or "default"
        for where, key in (("annotations", GANG_NAME), ("labels", KUEUE_GROUP_LABEL)):
            keys = meta.get(where)
            name = keys.get(key) if isinstance(keys, JSON_OBJECT) else None
            if isinstance(name, str) and isinstance(namespace, str):
                by_gang.setdefault((namespace, name.strip()), []).append(obj)

    def siblings(namespace: str, gang_name: str) -> Sequence[KubeObject]:
        return by_gang.get((namespace, gang_name), ())

    return siblings


def seen_count(gang: Gang) -> int:
    """Members the gang knows (every role but the unseen one)."""
    return sum(r.count for r in gang.roles if r.name != UNSEEN)


def unseen_warning(gang: Gang, capacity: Capacity) -> str:
    """The warning when minMember members like the seen ones could not be packed; "".

    Unseen members are taken to be like the smallest seen member (fewest GPUs), the
    most forgiving guess: the warning is given only when even that could never run.
    """
    unseen = sum(r.count for r in gang.roles if r.name == UNSEEN)
    seen_roles = [r for r in gang.roles if r.name != UNSEEN and r.count > 0]
    if not unseen or not seen_roles or capacity.unknown:
        return ""
    gpu = capacity.config.is_gpu_resource
    like = min(
        seen_roles, key=lambda r: sum(a for res, a in r.demand.items() if gpu(res) and a > 0)
    )
    demand = {res: a for res, a in like.demand.items() if gpu(res) and a > 0}
    if not demand:
        return ""
    guess = replace(
        gang,
        roles=(*seen_roles, Role(f"{UNSEEN}-like-seen", unseen, like.demand, like.placement)),
    )
    if check_gang(guess, capacity).allowed:
        return ""
    bins = capacity.bins([like.placement], view="ever")
    fit = sum(
        b.count * min(b.amount(res) // a for res, a in demand.items())
        for b in bins
        if 0 in b.eligible
    )
    each = " + ".join(f"{a} {resource_text(res)}" for res, a in sorted(demand.items()))
    name = f"{gang.namespace}/{gang.name}"
    if len(name) > 40:
        name = name[:39] + "…"
    return fit_warning(
        f"gang {name}: {gang.min_member} members like the {seen_count(gang)} seen "
        f"({each} each) cannot be packed, at most {fit} fit"
    )


def all_seen_note(gang: Gang) -> str:
    """For a pod-based gang with every member seen: "all 5 members seen: 15 nvidia.com/gpu"."""
    if gang.recognizer not in POD_BASED or any(r.name == UNSEEN for r in gang.roles):
        return ""
    total = ", ".join(
        f"{a} {resource_text(res)}" for res, a in sorted(gang.total_demand().items()) if a)
    return f"all {gang.size} members seen: {total or 'no GPUs'}"


__all__ = [
    "MAX_SIBLINGS",
    "POD_BASED",
    "all_seen_note",
    "siblings_among",
    "summed",
    "unseen_warning",
]
