"""A shared ResourceClaim counts once for the gang (policies/dra/shared.py).

Roles are the policy core's plain `Role`s, their demand as `extended.with_claim_limits`
writes a pod's claims: `dra:<class>` for its own (ResourceClaimTemplate) devices,
`dra:<class>@<claim>` for a ResourceClaim it names (core/v1 PodResourceClaim
`resourceClaimName`).
"""

from __future__ import annotations

import pytest

from gangkeeper.policies.dra.resource_names import resource_text, shared_name
from gangkeeper.policies.dra.shared import charged_once
from gangkeeper.policies.model import Gang, Role, Source

GPU = "dra:gpu.example.com"
RACK = shared_name("gpu.example.com", "rack")


def gang(*roles: Role) -> Gang:
    size = sum(r.count for r in roles)
    return Gang("team", "g", size, roles, Source("batch/v1", "Job", "team", "g"))


def test_a_claim_shared_by_every_member_is_asked_by_one_member_only() -> None:
    out = charged_once(gang(Role("worker", 5, {GPU: 8, RACK: 4})))
    assert [(r.name, r.count, dict(r.demand)) for r in out.roles] == [
        ("worker", 4, {GPU: 8}), ("worker-claim", 1, {GPU: 12})]
    assert out.total_demand() == {GPU: 44}
    assert out.min_member == 5 and out.size == 5


def test_a_claim_named_by_two_roles_is_still_counted_once() -> None:
    out = charged_once(gang(Role("leader", 1, {RACK: 4}), Role("worker", 3, {GPU: 8, RACK: 4})))
    assert out.total_demand() == {GPU: 28}
    assert [(r.name, r.count) for r in out.roles] == [("leader", 1), ("worker", 3)]


def test_a_gang_without_shared_claims_is_returned_as_it_is() -> None:
    given = gang(Role("worker", 4, {GPU: 8}))
    assert charged_once(given) is given


@pytest.mark.parametrize(
    ("resource", "text"),
    [
        (GPU, "devices of DeviceClass gpu.example.com"),
        (RACK, "devices of DeviceClass gpu.example.com (ResourceClaim rack)"),
        ("nvidia.com/gpu", "nvidia.com/gpu"),
    ],
)
def test_messages_name_a_classs_devices_in_words_and_other_resources_as_they_are(
    resource: str, text: str
) -> None:
    assert resource_text(resource) == text
