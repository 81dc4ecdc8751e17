"""The pin: how a released member is tied to the node its gang was placed on — the
patch that writes it as the gate is lifted, and what reads it back from a pod.

A pin is required node affinity `matchFields: [{key: metadata.name, operator: In,
values: [<node>]}]`. kube-scheduler's NodeAffinity plugin turns `metadata.name In`
into its `PreFilterResult.NodeNames`, so a pinned pod is filtered on its one node,
not on every node as a `kubernetes.io/hostname` nodeSelector is (at 5,000 nodes a
1,000-pod gang binds 2.0x faster: docs/performance.md); and it names the Node itself,
whose hostname label may differ from its name.

Gated pods may gain scheduling directives (KEP-3838, stable since Kubernetes 1.30;
`validateNodeAffinityMutation` in pkg/apis/core/validation): required node affinity
may be set when absent, and each existing term may only gain matchExpressions or
matchFields. Terms are ORed, so `pin_patch` adds the pin to every term (an empty term
matches nothing and may not gain anything: it is left so), or, when there is no
term, sets one term holding just the pin. It `test`s the gates it read; the rest of
the pod's shape comes from the read the caller fences on (`resourceVersion`). Without
a node it is the plain gate removal.

`pin_of(placement)` reads a pin back: the node every term names by `metadata.name`,
or — written by versions before the matchFields pin, still read while their pods
live — the `kubernetes.io/hostname` nodeSelector (`names.PIN_LABEL`). `pinned` and
`unpinned` are a placement as the patch leaves it and as the member's owner would
recreate it.

Pure: values in, a JSON-patch list or `Placement`s out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..eligibility import named_nodes
from ..model import NodeSelectorTerm, Placement, Requirement
from ..names import GATE, PIN_LABEL, RELEASED_AT_ANNOTATION

#: The node field a pin names.
PIN_FIELD = "metadata.name"
#: Where required node affinity lives in a pod spec, level by level.
AFFINITY_LEVELS = (
    "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
)
_TERMS = "/spec/" + "/".join(AFFINITY_LEVELS)


def pointer_token(key: str) -> str:
    """A map key as a JSON-pointer segment (RFC 6901); every patch of labels,
    annotations or nodeSelector keys escapes with this one."""
    return key.replace("~", "~0").replace("/", "~1")


def pin_requirement(node: str) -> Requirement:
    """The matchFields entry that pins a pod to `node`."""
    return Requirement(PIN_FIELD, "In", (node,))


def affinity_levels(spec: Mapping[str, Any]) -> int:
    """How many of `AFFINITY_LEVELS` but the last a pod spec has, outermost first
    (0: no `affinity`; 3: required node affinity is set): what the pin patch must add."""
    body: object = spec
    for depth, key in enumerate(AFFINITY_LEVELS[:-1]):
        if not isinstance(body, Mapping) or body.get(key) is None:
            return depth
        body = body[key]
    return len(AFFINITY_LEVELS) - 1


def _term_ops(terms: Sequence[NodeSelectorTerm], levels: int, node: str) -> list[dict[str, Any]]:
    pin = {"key": PIN_FIELD, "operator": "In", "values": [node]}
    if not terms:
        value: object = [{"matchFields": [pin]}]
        for key in reversed(AFFINITY_LEVELS[levels + 1:]):
            value = {key: value}
        return [{"op": "add", "path": "/spec/" + "/".join(AFFINITY_LEVELS[:levels + 1]),
                 "value": value}]
    ops: list[dict[str, Any]] = []
    for index, term in enumerate(terms):
        if term.match_fields:
            ops.append({"op": "add", "path": f"{_TERMS}/{index}/matchFields/-", "value": pin})
        elif term.match_expressions:
            # `add` of a member replaces it: right whether matchFields is absent or [].
            ops.append({"op": "add", "path": f"{_TERMS}/{index}/matchFields", "value": [pin]})
    return ops


def pin_patch(
    gates: Sequence[str],
    placement: Placement,
    levels: int,
    node: str | None,
    gate: str = GATE,
    *,
    released_at: str | None = None,
) -> list[dict[str, Any]]:
    """JSON patch lifting only `gate` and, given a node, pinning the pod there.

    `placement` and `levels` (`affinity_levels`) are the pod's as read: the pin goes
    into each of its required terms, or makes the one term. With `released_at` (RFC
    3339) the pod's annotations (gang pods always have some) get
    `names.RELEASED_AT_ANNOTATION`, which the watchdog reads.
    """
    current = [{"name": g} for g in gates]
    remaining = [{"name": g} for g in gates if g != gate]
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/spec/schedulingGates", "value": current},
    ]
    if node:
        ops += _term_ops(placement.required_terms, levels, node)
    if released_at:
        path = f"/metadata/annotations/{pointer_token(RELEASED_AT_ANNOTATION)}"
        ops.append({"op": "add", "path": path, "value": released_at})
    ops.append({"op": "replace", "path": "/spec/schedulingGates", "value": remaining})
    return ops


def pinned(placement: Placement, node: str) -> Placement:
    """The placement as `pin_patch` leaves it."""
    pin = pin_requirement(node)
    terms = tuple(
        NodeSelectorTerm(t.match_expressions, (*t.match_fields, pin))
        if t.match_expressions or t.match_fields else t
        for t in placement.required_terms
    ) or (NodeSelectorTerm(match_fields=(pin,)),)
    return replace(placement, required_terms=terms)


@dataclass(frozen=True)
class Pin:
    """Where a pod is pinned: a node by name, or (an earlier version's pin) by the
    value of its `kubernetes.io/hostname` label; exactly one is set."""

    node: str = ""
    hostname: str = ""


def pin_of(placement: Placement) -> Pin | None:
    """The pod's pin, or None when nothing ties it to one node."""
    named = named_nodes(placement)
    if named is not None and len(named) == 1:
        return Pin(node=next(iter(named)))
    hostname = dict(placement.node_selector).get(PIN_LABEL)
    return Pin(hostname=hostname) if hostname else None


def unpinned(placement: Placement) -> Placement:
    """The placement without its pin, as the member's owner would recreate it (terms
    the pin alone made go; a hostname pin leaves the nodeSelector)."""
    pin = pin_of(placement)
    if pin is None:
        return placement
    if pin.hostname:
        selector = tuple((k, v) for k, v in placement.node_selector if k != PIN_LABEL)
        return replace(placement, node_selector=selector)
    drop = pin_requirement(pin.node)
    terms: list[NodeSelectorTerm] = []
    for term in placement.required_terms:
        if drop not in term.match_fields:
            terms.append(term)
            continue
        # The patch appended the pin: take the last one out.
        at = len(term.match_fields) - 1 - term.match_fields[::-1].index(drop)
        fields = term.match_fields[:at] + term.match_fields[at + 1:]
        if term.match_expressions or fields:
            terms.append(NodeSelectorTerm(term.match_expressions, fields))
    return replace(placement, required_terms=tuple(terms))
