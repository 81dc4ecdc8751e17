"""The workload kinds the recognisers validate, as (group, versions, plural).

The webhook rules and the RBAC are derived from them, so adding a recogniser adds its
webhook rule and its read access with no edit in this package. Pure.
"""

from __future__ import annotations

from gangkeeper.policies.recognizers.registry import default_registry


def recognised_resources() -> list[tuple[str, tuple[str, ...], str]]:
    """(group, versions, plural) of every workload kind in `default_registry()`."""
    return [
        (rule.group, tuple(rule.versions), rule.resource)
        for recognizer in default_registry()
        for rule in recognizer.rules
    ]
