"""Shared reading helpers for recognisers: object metadata, counts, owner chains, gangs.

Every recogniser normalises its kind into the same shape — roles built from pod
templates (`template_role`) and a gang built by `build_gang` — so all the rules that
cut across kinds live here once: explicit `gangkeeper.io/*` annotations win over what
the workload says, counts are whole and sane, and pods find their top-level owner by
following controller ownerReferences through the caller's lookup (`owner_chain`).

Pure: reads plain dicts and calls the lookup; no I/O of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidObject
from ..memo import MISSING, IdentityMemo
from ..model import JSON_OBJECT, Gang, KubeObject, OwnerLookup, Placement, Role, Source
from ..names import GANG_NAME_ANNOTATION as GANG_NAME
from ..names import MIN_MEMBER_ANNOTATION as MIN_MEMBER
from ..names import TOPOLOGY_PREFERRED_ANNOTATION as TOPOLOGY_PREFERRED
from ..names import TOPOLOGY_REQUIRED_ANNOTATION as TOPOLOGY_REQUIRED
from ..podspec import (
    as_list,
    as_mapping,
    as_str,
    field_path,
    other_requests,
    placement_of,
    pod_demand,
)
from ..settings.config import Config
from .owner_gangs import OwnerGangs

#: More members than this is a typo, not a gang; refusing it keeps arithmetic small.
MAX_MEMBERS = 1_000_000
#: ownerReferences deeper than this are a loop or junk; real chains are ≤ 4 long
#: (Pod → Job → JobSet → TrainJob; LWS worker → StatefulSet → leader Pod → ... → LWS).
MAX_OWNER_DEPTH = 8

#: The role that stands for members a recogniser has not seen (e.g. the other pods of
#: a group known from one pod): they count towards minMember but demand nothing, so
#: a verdict never rests on a guess about them.
UNSEEN_ROLE = "unseen"

_DECIMAL = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True)
class Meta:
    """The identity of an object, read once with types checked."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]

    @property
    def group(self) -> str:
        return group_of(self.api_version)

    def source(self) -> Source:
        return Source(self.api_version, self.kind, self.namespace, self.name, self.uid)


def group_of(api_version: str) -> str:
    """ "batch/v1" → "batch"; "v1" → "" (the core group)."""
    return api_version.rpartition("/")[0]


def type_of(obj: object) -> tuple[str, str] | None:
    """(group, kind) of an object, or None when it is not a Kubernetes object at all."""
    if not isinstance(obj, JSON_OBJECT):
        return None
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return group_of(api_version), kind


def claims(obj: KubeObject, kind: tuple[str, str], versions: Sequence[str]) -> bool:
    """Whether `obj` is of `kind` in a version the recogniser reads.

    A known kind in a version it does not know (a future v1beta7, an old v1alpha2)
    is an error naming the version and the ones it knows, never read with today's
    schema: its fields may mean something else.
    """
    if type_of(obj) != kind:
        return False
    version = str(obj["apiVersion"]).rpartition("/")[2]
    if version not in versions:
        group = f"{kind[0]}/" if kind[0] else ""
        known = ", ".join(f"{group}{v}" for v in versions)
        raise InvalidObject(
            "apiVersion",
            f"{kind[1]} {group}{version} is not a version gangkeeper reads "
            f"(supported: {known})",
        )
    return True


def _string_map(value: object, path: str) -> Mapping[str, str]:
    body = as_mapping(value, path)
    for key, item in body.items():
        as_str(item, field_path(path, str(key)))
    return body


# Every recogniser reads the same pod's metadata and owner chain; within one
# registry call (`one_call`) they are read once, in a memo the call owns (by object
# identity). 1,024 entries: a call reads a pod, its owners and, when it sums a gang,
# each sibling pod (two entries each); past that the oldest are read again.
CALL_MEMO_SIZE = 1024
_MEMO: ContextVar[IdentityMemo[str, Any] | None] = ContextVar("call_memo", default=None)
#: The owners' gangs memo of the decider running the current call (`one_call`).
_OWNERS: ContextVar[OwnerGangs | None] = ContextVar("owner_gangs", default=None)


@contextmanager
def one_call(owners: OwnerGangs | None = None) -> Iterator[None]:
    """Share metadata and owner chains between recognisers for the length of a call,
    and remember owners' gangs in `owners` (the caller's memo) when given."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set(IdentityMemo(CALL_MEMO_SIZE))
    owners_token = _OWNERS.set(owners)
    try:
        yield
    finally:
        _OWNERS.reset(owners_token)
        _MEMO.reset(token)


def _memo_get(kind: str, obj: object) -> Any:
    memo = _MEMO.get()
    found = MISSING if memo is None else memo.lookup(kind, obj)
    return None if found is MISSING else found


def _memo_put(kind: str, obj: object, value: Any) -> None:
    memo = _MEMO.get()
    if memo is not None:
        memo.put(kind, obj, value)


def read_meta(obj: KubeObject) -> Meta:
    """Metadata of an object whose apiVersion and kind are already known to be strings.

    A missing namespace reads as "default", as kubectl applies it; the webhook fills
    the request's namespace in before calling. A missing name falls back to
    generateName, so an object created with generateName can still be validated.
    """
    cached = _memo_get("meta", obj)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    metadata = as_mapping(obj.get("metadata"), "metadata")
    name = as_str(metadata.get("name"), "metadata.name", default="") or as_str(
        metadata.get("generateName"), "metadata.generateName", default=""
    )
    meta = Meta(
        api_version=as_str(obj.get("apiVersion"), "apiVersion"),
        kind=as_str(obj.get("kind"), "kind"),
        namespace=as_str(metadata.get("namespace"), "metadata.namespace", default="") or "default",
        name=name,
        uid=as_str(metadata.get("uid"), "metadata.uid", default=""),
        labels=_string_map(metadata.get("labels"), "metadata.labels"),
        annotations=_string_map(metadata.get("annotations"), "metadata.annotations"),
    )
    _memo_put("meta", obj, meta)
    return meta


def count(value: object, path: str, default: int) -> int:
    """A member count (replicas, parallelism, ...): whole, ≥ 0, at most MAX_MEMBERS."""
    if value is None:
        return default
    # bool is an int in Python; `true` in YAML is never a count.
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObject(path, f"must be a whole number, got {type(value).__name__} {value!r}")
    if value < 0:
        raise InvalidObject(path, f"cannot be negative, got {value}")
    if value > MAX_MEMBERS:
        raise InvalidObject(path, f"{value:,} is more than {MAX_MEMBERS:,} members; refusing it")
    return value


def count_text(value: str, path: str) -> int:
    """A count written as a decimal string (annotations and labels hold only strings)."""
    text = value.strip()
    # ASCII digits only: str.isdigit() also accepts "²" and other digits int() refuses.
    if not _DECIMAL.fullmatch(text):
        raise InvalidObject(path, f"must be a whole number written in decimal, got {value!r}")
    return count(int(text), path, 0)


@dataclass(frozen=True)
class TemplateRole:
    """A role and the pod-template annotations it came from (for explicit keys)."""

    role: Role
    annotations: Mapping[str, str]
    path: str


def template_role(
    name: str, members: int, template: object, path: str, config: Config
) -> TemplateRole:
    """A role of `members` pods made from a pod template at `path`."""
    body = as_mapping(template, path, required=True)
    metadata_path = field_path(path, "metadata")
    metadata = as_mapping(body.get("metadata"), metadata_path)
    annotations = _string_map(metadata.get("annotations"), field_path(metadata_path, "annotations"))
    spec_path = field_path(path, "spec")
    spec = body.get("spec")
    return TemplateRole(
        role=Role(
            name=name,
            count=members,
            demand=pod_demand(spec, config, spec_path),
            placement=placement_of(spec, spec_path),
            requests=other_requests(spec, config, spec_path),
        ),
        annotations=annotations,
        path=metadata_path,
    )


def topology_of(annotations: Mapping[str, str]) -> tuple[str, ...]:
    """("required" | "preferred", key) from the topology annotations, or ()."""
    for mode, name in (("required", TOPOLOGY_REQUIRED), ("preferred", TOPOLOGY_PREFERRED)):
        if annotations.get(name):
            return (mode, annotations[name])
    return ()


def explicit_keys(annotations: Mapping[str, str], path: str) -> tuple[str | None, int | None]:
    """(gang name, minMember) from explicit gangkeeper annotations; None where absent."""
    name = annotations.get(GANG_NAME)
    if name is not None and not name.strip():
        raise InvalidObject(field_path(field_path(path, "annotations"), GANG_NAME), "is empty")
    raw_min = annotations.get(MIN_MEMBER)
    min_member = None
    if raw_min is not None:
        min_path = field_path(field_path(path, "annotations"), MIN_MEMBER)
        min_member = count_text(raw_min, min_path)
        if min_member < 1:
            raise InvalidObject(min_path, "must be at least 1")
    return (name.strip() if name is not None else None), min_member


def with_explicit(gang: Gang, name: str | None, min_member: int | None) -> Gang:
    """The gang with explicit annotation values applied; they win over the workload's.

    A minMember above the members this object accounts for means the gang spans more
    than this object (several Jobs or pods sharing one gang name): the others are
    added as an UNSEEN_ROLE that demands nothing.
    """
    if name is None and min_member is None:
        return gang
    roles = tuple(r for r in gang.roles if r.name != UNSEEN_ROLE)
    seen = sum(r.count for r in roles)
    target = min_member if min_member is not None else gang.min_member
    if target > seen:
        roles = (*roles, Role(UNSEEN_ROLE, target - seen, {}, Placement()))
    return replace(gang, name=name or gang.name, min_member=target, roles=roles)


def build_gang(
    meta: Meta,
    name: str,
    parts: Sequence[TemplateRole],
    recognizer: str,
    min_member: int | None = None,
) -> Gang | None:
    """A gang from its roles, explicit template annotations applied; None if < 2 pods.

    Roles with no pods are dropped. One member alone is not a gang unless explicit
    annotations say it belongs to a larger one.
    """
    roles = tuple(p.role for p in parts if p.role.count > 0)
    size = sum(r.count for r in roles)
    explicit_name: str | None = None
    explicit_min: int | None = None
    for part in parts:
        part_name, part_min = explicit_keys(part.annotations, part.path)
        # Two templates of one workload naming different gangs is a contradiction
        # the user must resolve; guessing would split or merge gangs silently.
        if part_name is not None:
            if explicit_name is not None and part_name != explicit_name:
                raise InvalidObject(
                    field_path(field_path(part.path, "annotations"), GANG_NAME),
                    f"{part_name!r} differs from {explicit_name!r} set on another template",
                )
            explicit_name = part_name
        if part_min is not None:
            if explicit_min is not None and part_min != explicit_min:
                raise InvalidObject(
                    field_path(field_path(part.path, "annotations"), MIN_MEMBER),
                    f"{part_min} differs from {explicit_min} set on another template",
                )
            explicit_min = part_min
    if explicit_name is None and explicit_min is None and size < 2:
        return None
    gang = Gang(
        namespace=meta.namespace,
        name=name,
        min_member=min(min_member, size) if min_member is not None else size,
        roles=roles,
        source=meta.source(),
        recognizer=recognizer,
        topology=next((t for p in parts if (t := topology_of(p.annotations))), ()),
    )
    return with_explicit(gang, explicit_name, explicit_min)


# --- owner chains -----------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """One controller ownerReference on the way up, and the object when the lookup knew it."""

    api_version: str
    kind: str
    name: str
    uid: str
    obj: KubeObject | None

    @property
    def group(self) -> str:
        return group_of(self.api_version)


def controller_ref(obj: KubeObject) -> Mapping[str, Any] | None:
    """The ownerReference with controller: true, if any; malformed entries are skipped.

    ownerReferences are written by controllers, not users, and a pod whose references
    cannot be read is simply not followed: it may still be recognised by its labels.
    """
    metadata = obj.get("metadata")
    if not isinstance(metadata, JSON_OBJECT):
        return None
    refs = metadata.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if (
            isinstance(ref, JSON_OBJECT)
            and ref.get("controller") is True
            and isinstance(ref.get("apiVersion"), str)
            and isinstance(ref.get("kind"), str)
            and isinstance(ref.get("name"), str)
        ):
            return ref
    return None


def owner_chain(obj: KubeObject, namespace: str, lookup: OwnerLookup) -> tuple[Link, ...]:
    """Controller owners from the nearest up, as far as the references go.

    An owner the lookup does not know still appears (obj None) but ends the chain:
    its own owners cannot be read.
    """
    cached = _memo_get("chain", obj)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    links: list[Link] = []
    current: KubeObject | None = obj
    seen: set[tuple[str, str, str]] = set()
    while current is not None and len(links) < MAX_OWNER_DEPTH:
        ref = controller_ref(current)
        if ref is None:
            break
        key = (ref["apiVersion"], ref["kind"], ref["name"])
        if key in seen:  # a reference loop: junk, stop rather than spin
            break
        seen.add(key)
        owner = lookup(ref["apiVersion"], ref["kind"], namespace, ref["name"])
        uid = ref.get("uid")
        links.append(
            Link(
                ref["apiVersion"],
                ref["kind"],
                ref["name"],
                uid if isinstance(uid, str) else "",
                owner if isinstance(owner, JSON_OBJECT) else None,
            )
        )
        current = links[-1].obj
    chain = tuple(links)
    _memo_put("chain", obj, chain)
    return chain


def topmost(
    chain: Sequence[Link], kinds: set[tuple[str, str]], wrapped_by: set[tuple[str, str]]
) -> Link | None:
    """The top-most link of one of `kinds`, unless a `wrapped_by` kind sits above it.

    A Job inside a JobSet belongs to the JobSet's gang, a JobSet made by a TrainJob to
    the TrainJob's: the recogniser of the outermost kind decides, even when that
    outer object is unknown to the lookup.
    """
    for index in range(len(chain) - 1, -1, -1):
        link = chain[index]
        if (link.group, link.kind) in kinds:
            above = chain[index + 1 :]
            if any((a.group, a.kind) in wrapped_by for a in above):
                return None
            return link
    return None


def role_named(gang: Gang, name: str) -> str | None:
    """The gang's role of that name (case-insensitive), as the gang spells it."""
    wanted = name.lower()
    for role in gang.roles:
        if role.name.lower() == wanted:
            return role.name
    return None


def lookup_object(
    lookup: OwnerLookup, api_version: str, kind: str, namespace: str, name: str
) -> KubeObject | None:
    """The lookup's answer, or None for anything that is not an object."""
    if not name:
        return None
    found = lookup(api_version, kind, namespace, name)
    return found if isinstance(found, JSON_OBJECT) else None


def items_of(value: object, path: str) -> list[tuple[str, Any]]:
    """(path, item) pairs of a list field, for error messages naming the index."""
    return [(field_path(path, i), item) for i, item in enumerate(as_list(value, path))]


def owner_gangs(
    recognizer: Any, obj: KubeObject, lookup: OwnerLookup, config: Config
) -> list[Gang] | None:
    """`recognizer.recognize_object(obj)`, remembered in the call's `OwnerGangs`.

    Only for kinds whose gangs depend on the object alone (not on other objects
    found through the lookup).
    """
    def compute() -> list[Gang] | None:
        gangs: list[Gang] | None = recognizer.recognize_object(obj, lookup, config)
        return gangs

    owners = _OWNERS.get()
    if owners is None:
        return compute()
    return owners.get(recognizer.name, obj, config, compute)
