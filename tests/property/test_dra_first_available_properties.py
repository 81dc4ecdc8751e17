"""A member whose claims' firstAvailable alternatives may take more than their count
is pinned only where its largest alternative fits.

Random small fleets of 4- and 8-device nodes (`dra:gpus`), some devices used by bound
pods, and one or two gated gangs whose members ask 1 to 8 devices, some of them with
up to 6 more they may take (`PodInfo.pin_extra`, from `dra.pinnable.pin_extra`). For
every plan, on every node a release pins members to, the bound pods' devices plus the
pinned members' devices at their largest alternative fit what the node offers, so the
allocator finds every member's devices whichever alternative it takes; and a released
gang is pinned whole or not at all.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from builders.gangs import members, node, pod
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies import Config
from gangkeeper.policies.cluster.observed_gangs import PodInfo, pod_info
from gangkeeper.policies.release.plan import plan

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)
DEVICES = "dra:gpus"
CONFIG = dataclasses.replace(Config(), gpu_resources=(*Config().gpu_resources, "dra:*"))


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[PodInfo], dict[str, int]]:
    counts = draw(st.lists(st.sampled_from([4, 8]), min_size=1, max_size=5))
    nodes = [node(f"n{i}", c, resource=DEVICES) for i, c in enumerate(counts)]
    infos = []
    for i, count in enumerate(counts):
        used = draw(st.sampled_from([0, 0, 2, count]))
        if used:
            bound = pod(f"other-{i}", used, gates=(), node_name=f"n{i}", phase="Running",
                        resource=DEVICES)
            infos.append(pod_info(bound, CONFIG, claims=""))
    for gang in ("g", "h")[: draw(st.integers(1, 2))]:
        for raw in members(gang, draw(st.integers(1, 4)),
                           gpus=draw(st.sampled_from([1, 2, 4, 8])), resource=DEVICES):
            raw["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "t"}]
            extra = draw(st.sampled_from([0, 0, 2, 4, 6]))
            infos.append(pod_info(raw, CONFIG, claims="",
                                  pin_extra={DEVICES: extra} if extra else None))
    return nodes, infos, {f"n{i}": c for i, c in enumerate(counts)}


@settings(max_examples=300, deadline=None)
@given(cases())
def test_a_member_is_pinned_only_where_its_largest_alternative_fits(
    case: tuple[list[dict[str, Any]], list[PodInfo], dict[str, int]],
) -> None:
    nodes, infos, counts = case
    result = plan(infos, nodes, CONFIG, 0.0)
    used = {n: 0 for n in counts}
    for info in infos:
        if info.node_name:
            used[info.node_name] += info.demand.get(DEVICES, 0)
    pinned_on: set[str] = set()
    for release in result.releases:
        pinned = [p for p in release.pods if p.uid in release.pins]
        assert pinned == [] or len(pinned) == len(release.pods), release
        for info in pinned:
            where = release.pins[info.uid]
            pinned_on.add(where)
            used[where] += info.demand[DEVICES] + info.pin_extra.get(DEVICES, 0)
    over = {n: (used[n], counts[n]) for n in pinned_on if used[n] > counts[n]}
    assert over == {}, (over, result.releases)
