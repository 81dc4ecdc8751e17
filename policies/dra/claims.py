"""Device demand: what ResourceClaims and ResourceClaimTemplates ask of device classes.

Fields, as `k8s.io/api/resource/v1/types.go` defines them:
- a pod's `spec.resourceClaims[]` (`PodResourceClaim`, core/v1): `name` and one of
  `resourceClaimName` (an existing ResourceClaim, which every pod naming it shares)
  or `resourceClaimTemplateName` (a claim made from the template for each pod);
- `ResourceClaimTemplate.spec.spec` and `ResourceClaim.spec` are a `ResourceClaimSpec`:
  `devices.requests[]` (`DeviceRequest`), each `name` and one of
  `exactly` (`ExactDeviceRequest`: `deviceClassName`, `allocationMode` ExactCount
  (default) or All, `count` (default 1), `adminAccess`, `selectors`) or
  `firstAvailable[]` (`DeviceSubRequest`, the same fields, tried in order).

How each request is counted, so that a count is never more than the allocator needs:
- ExactCount: `count` devices of the class.
- All: every device of the class on the node (at least one); kept apart in `every`.
- firstAvailable: the alternative asking for the fewest devices (an All alternative
  beside exact ones: one device, all a node with one would give); when the
  alternatives name different classes no single class can be charged, and the
  request is left out.
- `adminAccess: true` takes no device away from others; left out.
- A request's own `selectors` (in `exactly`) narrow the class's devices: it is counted
  under a key of its own, `<class>#<hash of the expressions>` (`narrowed_key`), which
  `extended` counts on each node by the class's and the request's selectors together,
  and charged against its class too. A `firstAvailable` alternative's selectors are not
  applied (the alternatives are counted as their class: never more than the allocator
  needs).

A firstAvailable request whose alternatives are exact counts of one class, with no
selectors or admin access of their own, takes between its smallest and its largest
alternative: the difference is kept in `extra`, which the release's pinning charges
too (whichever alternative the allocator takes then fits).

Where the count may differ from what the allocator takes on a node (other
firstAvailable alternatives, adminAccess, a request left out) the demand keeps the
reason in `doubts`: the count still judges whether the gang could fit, but it cannot
promise a node (`pinnable.pinning`). All and a request's own selectors are no doubt:
a node's whole node (`dra:<class>/all`) and its narrowed count answer for them
(`assigner.whole_nodes`; the release's `pinning` leaves nodes mixing devices the
selectors accept and devices they do not to the allocator).

Pure: plain dicts in, frozen dataclasses out.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidObject
from ..podspec import as_list, as_mapping, as_str, field_path
from .classes import cel_expressions
from .resource_names import NARROWED

_MODES = ("ExactCount", "All")


@dataclass(frozen=True)
class DeviceDemand:
    """Devices asked of each class (or narrowed key): `counts` exactly, and all of each
    in `every`; `doubts`: why a node with that many free devices may still not satisfy a
    request; `narrowed`: each narrowed key's (class, request's CEL expressions)."""

    counts: Mapping[str, int] = field(default_factory=dict)
    every: frozenset[str] = frozenset()
    doubts: frozenset[str] = frozenset()
    narrowed: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    #: Devices of each class that firstAvailable requests may take beyond `counts`
    #: (their largest alternative's count less their smallest's, `_spread`).
    extra: Mapping[str, int] = field(default_factory=dict)

    def plus(self, other: DeviceDemand) -> DeviceDemand:
        return DeviceDemand(dict(Counter(self.counts) + Counter(other.counts)),
                            self.every | other.every, self.doubts | other.doubts,
                            {**self.narrowed, **other.narrowed},
                            dict(Counter(self.extra) + Counter(other.extra)))  # fmt: skip




def narrowed_key(device_class: str, expressions: tuple[str, ...]) -> str:
    """`<class>#<hash>`: the same expressions in the same order give the same key."""
    digest = hashlib.sha256("\x00".join(expressions).encode()).hexdigest()[:12]
    return f"{device_class}{NARROWED}{digest}"


def class_of(key: str) -> str:
    """The class of a key of `counts` or `every` (itself when not narrowed)."""
    return key.partition(NARROWED)[0]


def _alternative(raw: object, path: str) -> tuple[str, int | None] | None:
    """(class, count; None for All) of an `exactly` or a sub-request; None: left out."""
    body = as_mapping(raw, path, required=True)
    device_class = as_str(body.get("deviceClassName"), field_path(path, "deviceClassName"))
    cel_expressions(body, path)  # malformed selectors are bad input wherever they are
    mode_path = field_path(path, "allocationMode")
    mode = as_str(body.get("allocationMode"), mode_path, default="ExactCount")
    if mode not in _MODES:
        raise InvalidObject(mode_path, f"must be one of {', '.join(_MODES)}, got {mode!r}")
    if body.get("adminAccess") is True:
        return None
    if mode == "All":
        return device_class, None
    count_path = field_path(path, "count")
    count = body.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidObject(count_path, f"must be a whole number of at least 1, got {count!r}")
    return device_class, count


def _request(raw: object, path: str,
             narrowed: dict[str, tuple[str, tuple[str, ...]]]) -> tuple[str, int | None] | None:
    """(class or narrowed key, count; None for All); a narrowed key goes in `narrowed`."""
    body = as_mapping(raw, path, required=True)
    if "exactly" in body:
        exactly_path = field_path(path, "exactly")
        asked = _alternative(body["exactly"], exactly_path)
        expressions = cel_expressions(as_mapping(body["exactly"], exactly_path), exactly_path)
        if asked is None or not expressions:
            return asked
        key = narrowed_key(asked[0], expressions)
        narrowed[key] = (asked[0], expressions)
        return key, asked[1]
    alternatives_path = field_path(path, "firstAvailable")
    raw_alternatives = as_list(body.get("firstAvailable"), alternatives_path)
    if not raw_alternatives:
        raise InvalidObject(path, "must set exactly or firstAvailable")
    alternatives = [
        _alternative(a, field_path(alternatives_path, i)) for i, a in enumerate(raw_alternatives)
    ]
    if any(a is None for a in alternatives):
        return None  # one alternative takes nothing away: so may the request
    classes = {a[0] for a in alternatives if a is not None}
    if len(classes) != 1:
        return None
    counts = [a[1] for a in alternatives if a is not None]
    exact = [c for c in counts if c is not None]
    if not exact:
        return classes.pop(), None
    # An All alternative may be met by a single device (on a node with one).
    return classes.pop(), (1 if None in counts else min(exact))


def _spread(raw: object) -> tuple[str, int] | None:
    """(class, its largest alternative's count less its smallest's) of a (valid)
    firstAvailable request of more than one alternative, each an exact count of one
    class with no selectors or admin access of its own: whichever the allocator takes,
    it takes between the two. None for any other request."""
    body = raw if isinstance(raw, Mapping) else {}
    alternatives = body.get("firstAvailable")
    if "exactly" in body or not isinstance(alternatives, list) or len(alternatives) < 2:
        return None
    classes: set[object] = set()
    counts: list[int] = []
    for alternative in alternatives:
        if (not isinstance(alternative, Mapping) or alternative.get("selectors")
                or alternative.get("adminAccess") is True
                or alternative.get("allocationMode", "ExactCount") != "ExactCount"):
            return None
        classes.add(alternative.get("deviceClassName"))
        counts.append(alternative.get("count", 1))
    if len(classes) != 1:
        return None
    return str(classes.pop()), max(counts) - min(counts)


def _doubt(raw: object) -> str:
    """Why counting this (valid) request may not be what the allocator takes on a node;
    "" when the count, or its `_spread`, says that."""
    body = raw if isinstance(raw, Mapping) else {}
    name = body.get("name", "?")
    alternatives = body.get("firstAvailable") or [{}]
    if "exactly" not in body and any(
            isinstance(a, Mapping) and a.get("selectors") for a in alternatives):
        # Not applied to the count (the class's devices are counted): no node promised.
        return (f"request {name} has firstAvailable alternatives with selectors of their "
                "own (counted as their class)")  # fmt: skip
    if "exactly" not in body and len(alternatives) > 1 and _spread(raw) is None:
        return (f"request {name} has firstAvailable alternatives of more than one class, "
                "an All one, or selectors or admin access of their own (counted as its "
                "smallest)")  # fmt: skip
    exact = body["exactly"] if "exactly" in body else alternatives[0]
    if not isinstance(exact, Mapping):
        return ""
    if exact.get("adminAccess") is True:
        return f"request {name} asks admin access (counted as no device)"
    return ""


def claim_spec_demand(spec: object, path: str) -> DeviceDemand:
    """The demand of one `ResourceClaimSpec`."""
    body = as_mapping(spec, path)
    devices_path = field_path(path, "devices")
    requests_path = field_path(devices_path, "requests")
    counts: Counter[str] = Counter()
    every: set[str] = set()
    doubts: set[str] = set()
    narrowed: dict[str, tuple[str, tuple[str, ...]]] = {}
    extra: Counter[str] = Counter()
    raw_requests = as_list(as_mapping(body.get("devices"), devices_path).get("requests"),
                           requests_path)  # fmt: skip
    for i, raw in enumerate(raw_requests):
        asked = _request(raw, field_path(requests_path, i), narrowed)
        # Every request left out (None) has a doubt: adminAccess, or alternatives.
        doubts.update(filter(None, [_doubt(raw)]))
        if asked is None:
            continue
        device_class, count = asked
        if count is None:
            every.add(device_class)
        else:
            counts[device_class] += count
        spread = _spread(raw)
        if spread is not None and spread[1] > 0:
            extra[spread[0]] += spread[1]
    return DeviceDemand(dict(counts), frozenset(every), frozenset(doubts), narrowed,
                        dict(extra))  # fmt: skip


def read_claim_template(obj: Mapping[str, Any]) -> tuple[str, DeviceDemand]:
    """(name, demand of each claim made from it) of a ResourceClaimTemplate."""
    name = as_str(as_mapping(obj.get("metadata"), "metadata").get("name"), "metadata.name")
    base = f"ResourceClaimTemplate {name}: spec"
    spec = as_mapping(obj.get("spec"), base, required=True)
    return name, claim_spec_demand(spec.get("spec"), field_path(base, "spec"))


def read_claim(obj: Mapping[str, Any]) -> tuple[str, DeviceDemand]:
    """(name, demand) of a ResourceClaim."""
    name = as_str(as_mapping(obj.get("metadata"), "metadata").get("name"), "metadata.name")
    return name, claim_spec_demand(obj.get("spec"), f"ResourceClaim {name}: spec")


@dataclass(frozen=True)
class PodClaims:
    """What one pod asks through its resource claims."""

    #: From its templates: every pod gets claims of its own.
    own: DeviceDemand
    #: ResourceClaims it shares with whichever other pods name them.
    shared: frozenset[str]
    #: Templates it names that were not given: its demand is not fully known.
    unresolved: frozenset[str]


def pod_claims(spec: object, templates: Mapping[str, DeviceDemand],
               path: str = "spec") -> PodClaims:  # fmt: skip
    body = as_mapping(spec, path, required=True)
    claims_path = field_path(path, "resourceClaims")
    own = DeviceDemand()
    shared: set[str] = set()
    unresolved: set[str] = set()
    for i, raw in enumerate(as_list(body.get("resourceClaims"), claims_path)):
        entry_path = field_path(claims_path, i)
        entry = as_mapping(raw, entry_path, required=True)
        claim = as_str(entry.get("resourceClaimName"),
                       field_path(entry_path, "resourceClaimName"), default="")
        template = as_str(entry.get("resourceClaimTemplateName"),
                          field_path(entry_path, "resourceClaimTemplateName"), default="")
        if bool(claim) == bool(template):
            raise InvalidObject(
                entry_path, "must set exactly one of resourceClaimName, resourceClaimTemplateName"
            )
        if claim:
            shared.add(claim)
        elif template in templates:
            own = own.plus(templates[template])
        else:
            unresolved.add(template)
    return PodClaims(own, frozenset(shared), frozenset(unresolved))
