"""The workload kinds the recognisers know, as the installation needs them.

The kinds they validate (group, versions, plural), the owners they follow and the kinds
requeued by suspension, each as declared by its recogniser: the webhook rules, the
RBAC and the match conditions are derived from them, so adding a recogniser adds its
webhook rule, its access and its pods' labels with no edit in this package. Pure.
"""

from __future__ import annotations

from typing import Literal

from gangkeeper.policies.recognizers.base import OwnerResource, Requeuing, ResourceRule
from gangkeeper.policies.recognizers.capabilities import (
    followed_owners,
    pod_label_prefixes,
    requeued,
)
from gangkeeper.policies.recognizers.registry import default_registry


def recognised_resources() -> list[tuple[str, tuple[str, ...], str]]:
    """(group, versions, plural) of every workload kind in `default_registry()`."""
    return [
        (rule.group, tuple(rule.versions), rule.resource)
        for recognizer in default_registry()
        for rule in recognizer.rules
    ]


def followed_owner_resources() -> tuple[OwnerResource, ...]:
    """The owners the recognisers follow besides their own kinds, by API group."""
    return followed_owners(default_registry())


def requeued_kinds(
    how: Literal["suspend", "recreate"],
) -> tuple[tuple[ResourceRule, Requeuing], ...]:
    """The kinds whose gangs are requeued `how`, by API group."""
    return requeued(default_registry(), how)


def marking_labels() -> tuple[str, ...]:
    """The label keys or prefixes the recognisers' kinds put on their pods."""
    return pod_label_prefixes(default_registry())
