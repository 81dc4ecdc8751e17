"""May a pod with this `Placement` run on this node? kube-scheduler's hard filters.

Implements, with the scheduler's exact semantics, the three filters that a pod's own
constraints impose on a node:

- NodeAffinity, `spec.nodeSelector` part: every key=value must be a node label.
- NodeAffinity, required terms (k8s.io/component-helpers/scheduling/corev1/nodeaffinity):
  terms are ORed, requirements inside a term ANDed; an empty term matches nothing;
  `Gt`/`Lt` compare the label and the value as base-10 int64 (a label that is not an
  integer fails the requirement); `NotIn` and `DoesNotExist` hold for a node without
  the label; `matchFields` knows only `metadata.name` with `In`/`NotIn` and one value.
  A malformed requirement makes its term match nothing, as the scheduler's parse
  error does.
- TaintToleration (k8s.io/api/core/v1 `Toleration.ToleratesTaint`): every taint with
  effect NoSchedule or NoExecute must be tolerated; PreferNoSchedule never excludes.

Pure functions over plain values: no I/O, no knowledge of capacity or gangs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .model import NodeSelectorTerm, Placement, Requirement, Taint, Toleration

#: Taint effects that keep a pod off a node; PreferNoSchedule is only a preference.
EXCLUDING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})

#: What Go's strconv.ParseInt(s, 10, 64) accepts: an optional sign and digits, nothing
#: else (Python's int() would also take spaces and underscores).
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _go_int64(text: str) -> int | None:
    if not _GO_INT.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _well_formed(requirement: Requirement, *, field: bool) -> bool:
    """The shape rules labels.NewRequirement / the field selector parser enforce."""
    op, values = requirement.operator, requirement.values
    if field:
        return op in ("In", "NotIn") and len(values) == 1
    if op in ("In", "NotIn"):
        return len(values) > 0
    if op in ("Exists", "DoesNotExist"):
        return len(values) == 0
    if op in ("Gt", "Lt"):
        return len(values) == 1 and _go_int64(values[0]) is not None
    return False


def requirement_matches(requirement: Requirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions entry against node labels (labels.Requirement.Matches)."""
    op, key = requirement.operator, requirement.key
    present = key in labels
    if op == "In":
        return present and labels[key] in requirement.values
    if op == "NotIn":
        return not present or labels[key] not in requirement.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    # Gt / Lt: both sides must be int64; a missing or non-integer label fails.
    if not present or len(requirement.values) != 1:
        return False
    have, bound = _go_int64(labels[key]), _go_int64(requirement.values[0])
    if have is None or bound is None:
        return False
    return have > bound if op == "Gt" else have < bound


def field_matches(requirement: Requirement, node_name: str) -> bool:
    """One matchFields entry; the scheduler exposes only metadata.name as a field."""
    # fields.Set.Get of an unknown key is "", which is what the scheduler compares.
    have = node_name if requirement.key == "metadata.name" else ""
    equal = have == requirement.values[0]
    return equal if requirement.operator == "In" else not equal


def term_matches(term: NodeSelectorTerm, node_name: str, labels: Mapping[str, str]) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(_well_formed(r, field=False) for r in term.match_expressions):
        return False
    if not all(_well_formed(r, field=True) for r in term.match_fields):
        return False
    return all(requirement_matches(r, labels) for r in term.match_expressions) and all(
        field_matches(r, node_name) for r in term.match_fields
    )


def selector_matches(placement: Placement, node_name: str, labels: Mapping[str, str]) -> bool:
    """nodeSelector AND (any required term); no required terms means no constraint."""
    if any(labels.get(key) != value for key, value in placement.node_selector):
        return False
    if not placement.required_terms:
        return True
    return any(term_matches(t, node_name, labels) for t in placement.required_terms)


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """k8s.io/api/core/v1 Toleration.ToleratesTaint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


def tolerates_all(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> bool:
    """Every NoSchedule/NoExecute taint is tolerated by some toleration."""
    held = tuple(tolerations)
    return all(
        any(tolerates(t, taint) for t in held)
        for taint in taints
        if taint.effect in EXCLUDING_EFFECTS
    )


def node_eligible(
    placement: Placement,
    *,
    node_name: str,
    labels: Mapping[str, str],
    taints: Iterable[Taint],
) -> bool:
    """Whether kube-scheduler's NodeAffinity and TaintToleration filters pass."""
    return selector_matches(placement, node_name, labels) and tolerates_all(
        placement.tolerations, taints
    )


def named_nodes(placement: Placement) -> frozenset[str] | None:
    """The only nodes the placement may use, when its required terms name them by
    `metadata.name In` (the NodeAffinity plugin's `PreFilterResult.NodeNames`): the
    union over the terms, each term's names the intersection of its `In` fields. None
    when a term names none (or there is no term): any node may do.

    A superset of the eligible nodes (nodeSelector, expressions and taints are not
    read): callers still filter each one with `node_eligible`.
    """
    if not placement.required_terms:
        return None
    names: set[str] = set()
    for term in placement.required_terms:
        if not term.match_expressions and not term.match_fields:
            continue  # an empty term matches nothing
        sets = [frozenset(r.values) for r in term.match_fields
                if r.key == "metadata.name" and r.operator == "In"]
        if not sets:
            return None
        names |= frozenset.intersection(*sets)
    return frozenset(names)


def uses_node_identity(placement: Placement, identity_keys: Iterable[str]) -> bool:
    """Whether the answer can differ between nodes with equal labels and taints.

    True when the placement reads the node name (matchFields) or a label that is
    unique per node (e.g. kubernetes.io/hostname): such placements are evaluated per
    node instead of per shape.
    """
    keys = frozenset(identity_keys)
    if any(key in keys for key, _ in placement.node_selector):
        return True
    return any(
        term.match_fields or any(r.key in keys for r in term.match_expressions)
        for term in placement.required_terms
    )
