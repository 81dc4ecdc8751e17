"""The per-kind tables other layers need, derived from what a registry's recognisers declare.

Every fact about a workload kind is declared once, on its recogniser (`base.py`: the
kinds it validates, the owners it follows, the labels its pods carry, how its gangs are
requeued); the watchdog, the recovery, the controller's suspension, the server's watches,
the RBAC and the webhooks' match conditions read these functions, so adding a kind
is one module and one registry line, with no table to edit elsewhere.

Orders are deterministic and independent of the registry's order where that order
means precedence for pods rather than anything about these tables: by API group, stable
within one.

Pure: reads recognisers' declared data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Literal

from .base import (
    FollowsOwners,
    MarksPods,
    OwnerResource,
    Recognizer,
    RequeuesGangs,
    Requeuing,
    ResourceRule,
)


def followed_owners(registry: Iterable[Recognizer]) -> tuple[OwnerResource, ...]:
    """Every owner some recogniser follows (`FollowsOwners`), once, by API group."""
    found: dict[tuple[str, str, str], OwnerResource] = {}
    for recognizer in registry:
        if isinstance(recognizer, FollowsOwners):
            for owner in recognizer.follows:
                found.setdefault((owner.group, owner.version, owner.resource), owner)
    return tuple(sorted(found.values(), key=lambda owner: owner.group))


def pod_label_prefixes(registry: Iterable[Recognizer]) -> tuple[str, ...]:
    """Every label key or prefix some recogniser's pods carry (`MarksPods`), once."""
    found: dict[str, None] = {}
    for recognizer in registry:
        if isinstance(recognizer, MarksPods):
            found.update(dict.fromkeys(recognizer.pod_label_prefixes))
    return tuple(found)


def requeued(
    registry: Iterable[Recognizer], how: Literal["suspend", "recreate"]
) -> tuple[tuple[ResourceRule, Requeuing], ...]:
    """The kinds whose gangs are requeued `how` (`RequeuesGangs`), by API group."""
    found = [
        (rule, recognizer.requeue)
        for recognizer in registry
        if isinstance(recognizer, RequeuesGangs) and recognizer.requeue.how == how
        for rule in recognizer.rules
    ]
    return tuple(sorted(found, key=lambda pair: pair[0].group))


def recreating_kinds(registry: Iterable[Recognizer]) -> frozenset[str]:
    """Kinds whose controllers bring a requeued gang's pods back, either way: a deleted
    pod is recreated, and a suspended owner recreates its pods once resumed."""
    chosen = list(registry)
    return frozenset(
        rule.kind for how in ("suspend", "recreate") for rule, _ in requeued(chosen, how)
    )


def suspended_owners(registry: Iterable[Recognizer]) -> Mapping[tuple[str, str], str]:
    """(apiVersion, kind) to the plural of every served version of a kind requeued by
    suspension."""
    return MappingProxyType({
        (f"{rule.group}/{version}" if rule.group else version, rule.kind): rule.resource
        for rule, _ in requeued(registry, "suspend")
        for version in rule.versions
    })
