"""The release pins DRA gang members only where a count of devices can promise them.

Random small fleets whose nodes offer a class's devices (`dra:gpus`, as the controller's
device view gives them: a count, or `UNCOUNTED` where it cannot be known), some taken
by bound pods' claims, and one gated gang whose members claim devices, each member's
claims sure or not (`pod_info(claims=...)`, from `policies.dra.pinnable`). For every
plan:
(a) a gang with a member whose count is unsure gets no pin at all;
(b) no member is pinned on a node whose count is unknown;
(c) on no node do the pinned members and the bound pods ask more devices than it has;
(d) a released gang is pinned whole or not at all.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from builders.gangs import members, node, pod
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies import Config
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.dra.extended import UNCOUNTED
from gangkeeper.policies.release.plan import plan

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)
DEVICES = "dra:gpus"
CONFIG = dataclasses.replace(Config(), gpu_resources=(*Config().gpu_resources, "dra:*"))


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[Any], dict[str, int], bool]:
    counts = draw(st.lists(st.sampled_from([0, 4, 8, UNCOUNTED]), min_size=1, max_size=4))
    nodes = [node(f"n{i}", c, resource=DEVICES) for i, c in enumerate(counts)]
    infos = []
    for i, count in enumerate(counts):
        used = draw(st.sampled_from([0, 4, 8])) if count else 0
        if used:
            bound = pod(f"other-{i}", used, gates=(), node_name=f"n{i}", phase="Running",
                        resource=DEVICES)
            infos.append(pod_info(bound, CONFIG, claims=""))
    size = draw(st.integers(1, 4))
    unsure = False
    gpus = draw(st.sampled_from([1, 2, 4, 8]))
    for raw in members("g", size, gpus=gpus, resource=DEVICES):
        raw["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "t"}]
        doubt = draw(st.sampled_from(["", "", "", "a claim whose request r is unsure"]))
        unsure = unsure or bool(doubt)
        infos.append(pod_info(raw, CONFIG, claims=doubt))
    names = [f"n{i}" for i in range(len(counts))]
    return nodes, infos, dict(zip(names, counts, strict=True)), unsure


@settings(max_examples=300, deadline=None)
@given(cases())
def test_dra_members_are_pinned_only_where_their_devices_are_surely_free(
    case: tuple[list[dict[str, Any]], list[Any], dict[str, int], bool],
) -> None:
    nodes, infos, counts, unsure = case
    result = plan(infos, nodes, CONFIG, 0.0)
    used = {n: 0 for n in counts}
    for info in infos:
        if info.node_name:
            used[info.node_name] += info.demand.get(DEVICES, 0)
    for release in result.releases:
        if unsure:
            assert release.pins == {} and "unsure" in release.unpinned, release
        pinned = [p for p in release.pods if p.uid in release.pins]
        assert pinned == [] or len(pinned) == len(release.pods), release
        for info in pinned:
            hostname = release.pins[info.uid]
            assert counts[hostname] != UNCOUNTED, release
            used[hostname] += info.demand[DEVICES]
    over = {n: u for n, u in used.items() if counts[n] != UNCOUNTED and u > counts[n]
            and any(n in r.pins.values() for r in result.releases)}
    assert over == {}, (over, result.releases)
