"""Volcano and scheduler-plugins PodGroup objects and their pods (recognizers/podgroup.py)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import GPU, Lookup, gpu_spec, no_lookup, pod, podgroup

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.model import Placement
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
FLAVOURS = ["volcano", "coscheduling"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_evenly_divided_total_is_each_members_share(flavour: str) -> None:
    obj = podgroup(flavour, "pg", 4, {GPU: "16", "cpu": "8"})
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert (gang.name, gang.min_member) == ("pg", 4)
    [role] = gang.roles
    assert (role.count, dict(role.demand)) == (4, {GPU: 4})
    # no templates: nothing restricts the nodes
    assert role.placement == Placement()
    assert gang.total_demand() == {GPU: 16}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_total_that_does_not_divide_is_not_split_by_guessing(flavour: str) -> None:
    [gang] = recognize_object(podgroup(flavour, "pg", 3, {GPU: 10}), no_lookup, CONFIG)
    assert gang.min_member == 3
    assert gang.total_demand() == {}


@pytest.mark.parametrize(("min_member", "gangs"), [(1, 0), (0, 0), (None, 0), (2, 1)])
def test_fewer_than_two_members_is_not_a_gang(min_member: int | None, gangs: int) -> None:
    assert len(recognize_object(podgroup("volcano", "pg", min_member), no_lookup, CONFIG)) == gangs


@pytest.mark.parametrize(
    ("flavour", "where", "key"),
    [
        ("volcano", "annotations", "scheduling.k8s.io/group-name"),
        ("coscheduling", "labels", "scheduling.x-k8s.io/pod-group"),
    ],
)
def test_a_pod_naming_its_podgroup_joins_that_gang(flavour: str, where: str, key: str) -> None:
    group = podgroup(flavour, "pg", 4, {GPU: 8})
    member = pod("p-0", gpu_spec(2), **{where: {key: "pg"}})
    membership = recognize_pod(member, Lookup(group), CONFIG)
    assert membership is not None
    assert membership.gang == recognize_object(group, no_lookup, CONFIG)[0]
    # the other flavour's key is not this flavour's: no cross-talk
    assert recognize_pod(member, no_lookup, CONFIG) is None


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda o: o["spec"].update(minMember=-4), "spec.minMember"),
        (lambda o: o["spec"].update(minMember="4"), "spec.minMember"),
        (
            lambda o: o["spec"].update(minResources={GPU: "1.5"}),
            'spec.minResources["nvidia.com/gpu"]',
        ),
        (
            lambda o: o["spec"].update(minResources={GPU: "-8"}),
            'spec.minResources["nvidia.com/gpu"]',
        ),
        (lambda o: o["spec"].update(minResources=[]), "spec.minResources"),
        (lambda o: o.pop("spec"), "spec"),
    ],
)
def test_a_malformed_podgroup_is_an_error_naming_the_field(mutate: Any, path: str) -> None:
    obj = podgroup("volcano", "pg", 4, {GPU: 8})
    mutate(obj)
    with pytest.raises(InvalidObject) as error:
        recognize_object(obj, no_lookup, CONFIG)
    assert error.value.path == path
