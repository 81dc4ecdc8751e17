"""Members sharing ResourceClaims are assigned as one (policies/release/shared_claims.py):
transitively grouped, their requests summed with the claims' devices once while not
allocated, tied to the node an allocation names; or the reason they cannot be."""

from __future__ import annotations

import dataclasses

from builders.gangs import members

from gangkeeper.policies import Config
from gangkeeper.policies.assigner.assign import Member
from gangkeeper.policies.assigner.pin import pin_of
from gangkeeper.policies.cluster.observed_gangs import PodInfo, pod_info
from gangkeeper.policies.release.shared_claims import grouped

DEVICES = "dra:gpus"
CONFIG = dataclasses.replace(Config(), gpu_resources=(*Config().gpu_resources, "dra:*"))


def pods(*claims: tuple[tuple[str, str, dict[str, int]], ...]) -> dict[str, PodInfo]:
    """One gang member asking 2 devices per entry, naming those shared claims."""
    raws = members("g", len(claims), gpus=2, resource=DEVICES)
    return {raw["metadata"]["name"]: pod_info(raw, CONFIG, claims="", shared_claims=named)
            for raw, named in zip(raws, claims, strict=True)}


def wanted(infos: dict[str, PodInfo]) -> list[Member]:
    return [Member(p.name, p.requests, p.placement) for p in infos.values()]


A = ("rack-a", "", {DEVICES: 1})
B = ("rack-b", "", {DEVICES: 3})


def test_members_sharing_claims_transitively_are_one_member_asking_each_claim_once() -> None:
    # g-0 and g-1 share rack-a, g-1 and g-2 rack-b: one group of three; g-3 shares none.
    infos = pods((A,), (A, B), (B,), ())
    result = grouped(infos, wanted(infos))
    assert not isinstance(result, str)
    members, sharing = result
    assert [m.name for m in members] == ["g-0", "g-3"]
    assert sharing["g-0"].members == ("g-0", "g-1", "g-2")
    assert members[0].requests[DEVICES] == 3 * 2 + 1 + 3
    assert members[0].requests["pods"] == 3


def test_an_allocated_claim_ties_its_group_to_its_node_and_asks_nothing_again() -> None:
    infos = pods((("rack-a", "node-7", {}),), (("rack-a", "node-7", {}),))
    result = grouped(infos, wanted(infos))
    assert not isinstance(result, str)
    (member,), _ = result
    pin = pin_of(member.placement)
    assert pin is not None and pin.node == "node-7"
    assert member.requests[DEVICES] == 4


def test_claims_allocated_on_two_nodes_cannot_be_one_member() -> None:
    infos = pods((("rack-a", "node-1", {}), ("rack-b", "node-2", {})),)
    assert grouped(infos, wanted(infos)) == (
        "shared ResourceClaims rack-a, rack-b are allocated on nodes node-1, node-2, and "
        "their pods may run on one only")
