"""A DRA class's whole node and its devices, tied (policies/assigner/whole_nodes.py):
an All request takes every device of its class on its node, so neither the fleet's
free amounts nor the assigner, member by member, may put anything else of the class
beside it. Plain dicts of resource names as `dra.extended` gives them."""

from __future__ import annotations

import pytest

from gangkeeper.policies.assigner.assign import Assignment, Member, NodeView, NoRoom, assign
from gangkeeper.policies.assigner.whole_nodes import free_amounts

GPU = "dra:gpu.example.com"
WHOLE = f"{GPU}/all"
H100 = f"{GPU}#0123456789ab"


def node(name: str, devices: int, **extra: int) -> NodeView:
    return NodeView(name, {}, (), {"pods": 110, GPU: devices, WHOLE: 1, **extra})


ALL = Member("all", {"pods": 1, GPU: 4, WHOLE: 1})  # charged the fleet's fewest: 4


def test_one_gang_never_puts_an_all_member_and_another_of_its_class_on_one_node() -> None:
    # By count dra-0 holds both (4 + 2 of 8); the allocator gives the All claim all 8.
    # Before the tie: Assignment {all: dra-0, two: dra-0}.
    two = Member("two", {"pods": 1, GPU: 2})
    assert isinstance(assign([ALL, two], [node("dra-0", 8)]), NoRoom)
    result = assign([ALL, two], [node("dra-0", 8), node("dra-1", 4)])
    assert isinstance(result, Assignment)
    assert result.nodes["all"] != result.nodes["two"]


def test_two_all_members_need_two_nodes_whatever_the_count() -> None:
    assert isinstance(assign([ALL, Member("all-2", ALL.requests)], [node("dra-0", 16)]), NoRoom)


@pytest.mark.parametrize(
    ("used", "expected"),
    [
        # A plain request may hold an H100 or not: the narrowed whole node stays
        # (such a node is left to the allocator: release.pinning.mixed_devices).
        pytest.param({GPU: 1}, {GPU: 7, WHOLE: 0, H100: 4, f"{H100}/all": 1},
                     id="a-device-used-takes-the-class-whole-node"),
        pytest.param({GPU: 4, WHOLE: 1}, {GPU: 0, WHOLE: 0, H100: 0, f"{H100}/all": 0},
                     id="the-class-whole-node-taken-takes-every-device"),
        pytest.param({GPU: 4, H100: 4, f"{H100}/all": 1},
                     {GPU: 4, WHOLE: 0, H100: 0, f"{H100}/all": 0},
                     id="a-narrowed-whole-node-takes-its-devices-not-the-others"),
        pytest.param({}, {GPU: 8, WHOLE: 1, H100: 4, f"{H100}/all": 1}, id="nothing-used"),
    ],
)  # fmt: skip
def test_free_amounts_of_a_node_of_four_h100_and_four_others(
    used: dict[str, int], expected: dict[str, int]
) -> None:
    allocatable = {GPU: 8, WHOLE: 1, H100: 4, f"{H100}/all": 1}
    assert free_amounts(allocatable, used) == expected


@pytest.mark.parametrize(
    ("used", "expected"),
    [
        pytest.param({GPU: 1}, {GPU: 7, WHOLE: 0, H100: 8, f"{H100}/all": 0},
                     id="any-device-used-is-one-the-selectors-accept"),
        # An All request narrowed to H100 took all 8 here, though charged the fleet's
        # fewest (4): nothing of the class is left (before: 4 plain devices looked free).
        pytest.param({GPU: 4, H100: 4, f"{H100}/all": 1},
                     {GPU: 0, WHOLE: 0, H100: 0, f"{H100}/all": 0},
                     id="a-narrowed-whole-node-takes-the-whole-class"),
    ],
)  # fmt: skip
def test_free_amounts_of_a_node_whose_eight_devices_are_all_h100(
    used: dict[str, int], expected: dict[str, int]
) -> None:
    allocatable = {GPU: 8, WHOLE: 1, H100: 8, f"{H100}/all": 1}
    assert free_amounts(allocatable, used) == expected


def test_one_gang_never_puts_a_narrowed_all_member_beside_a_member_of_its_class() -> None:
    # The assigner knows no node's amounts: a narrowed All takes the class whole.
    narrowed = Member("h100s", {"pods": 1, GPU: 4, H100: 4, f"{H100}/all": 1})
    two = Member("two", {"pods": 1, GPU: 2})
    only = NodeView("dra-0", {}, (), {"pods": 110, GPU: 8, WHOLE: 1, H100: 8,
                                      f"{H100}/all": 1})
    assert isinstance(assign([narrowed, two], [only]), NoRoom)
