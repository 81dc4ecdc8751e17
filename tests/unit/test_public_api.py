"""The public namespace `gangkeeper.policies` stays complete and consistent.

As httpx's tests/test_exported_members.py: whatever the package exposes is in
`__all__`, everything in `__all__` exists, and the names other parts of gangkeeper
and users build on (docs/internals.md) are there.
"""

from __future__ import annotations

import types

import pytest

from gangkeeper import policies


def test_every_public_name_is_in_all_once() -> None:
    public = {
        name
        for name, value in vars(policies).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"  # `from __future__ import annotations`
    }
    assert set(policies.__all__) == public
    assert len(policies.__all__) == len(set(policies.__all__))


def test_every_name_in_all_resolves() -> None:
    missing = [name for name in policies.__all__ if not hasattr(policies, name)]
    assert missing == []


@pytest.mark.parametrize(
    "name",
    [
        # model types and errors
        "Gang",
        "Role",
        "Placement",
        "Requirement",
        "NodeSelectorTerm",
        "Toleration",
        "Taint",
        "Source",
        "PodMembership",
        "Verdict",
        "KubeObject",
        "OwnerLookup",
        "Backend",
        "PolicyError",
        "InvalidObject",
        "InvalidConfig",
        # configuration and capacity
        "Config",
        "NodePool",
        "load_config",
        "Capacity",
        # the decisions
        "check_gang",
        "fits_now",
        "plan_pod",
        "MutationPlan",
        "decide_pod",
        "validate_object",
        "PodDecision",
        "ObjectDecision",
        "recognize_object",
        "recognize_pod",
        "default_registry",
        "pod_demand",
        "placement_of",
    ],
)
def test_the_documented_entry_points_are_exported(name: str) -> None:
    assert name in policies.__all__


def test_exports_are_the_defining_modules_objects() -> None:
    from gangkeeper.policies.admission import decision, mutation
    from gangkeeper.policies.cluster import capacity
    from gangkeeper.policies.fit import feasibility

    assert policies.Capacity is capacity.Capacity
    assert policies.check_gang is feasibility.check_gang
    assert policies.plan_pod is mutation.plan_pod
    assert policies.decide_pod is decision.decide_pod
