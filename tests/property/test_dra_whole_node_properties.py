"""An `allocationMode: All` member is pinned only to a node it takes whole.

Random small fleets whose nodes offer a class's devices (`dra:gpus`, 4 or 8) and its
one whole node (`dra:gpus/all`), as the controller's device view gives them; some
devices used by bound pods, some nodes taken whole by a bound All pod; then one or two
gated gangs whose members each ask either every device of the class on their node
(the fewest any node offers, 4, and the whole node: `dra.extended`) or 1 to 8 devices.
For every plan, on every node a pinned All member lands on:
(a) nothing else of the class runs or is pinned there (no bound pod's devices, no
    other member of its gang or of another gang), as the allocator, which gives the
    All claim every device of the node, requires;
(b) no node is given more devices than it offers (All members counted at the node's
    whole count);
(c) a released gang is pinned whole or not at all.
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
WHOLE = "dra:gpus/all"
FEWEST = 4
CONFIG = dataclasses.replace(Config(), gpu_resources=(*Config().gpu_resources, "dra:*"))


def asking(raw: dict[str, Any], whole: bool) -> dict[str, Any]:
    """The pod asking its devices through a claim; an All claim also asks the whole node."""
    raw["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "t"}]
    if whole:
        limits = raw["spec"]["containers"][0]["resources"]["limits"]
        limits[DEVICES], limits[WHOLE] = str(FEWEST), "1"
    return raw


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[PodInfo], dict[str, int]]:
    counts = draw(st.lists(st.sampled_from([4, 8]), min_size=1, max_size=5))
    nodes = []
    for i, count in enumerate(counts):
        raw = node(f"n{i}", count, resource=DEVICES)
        raw["status"]["allocatable"][WHOLE] = "1"
        nodes.append(raw)
    infos = []
    for i in range(len(counts)):
        use = draw(st.sampled_from(["none", "none", "some", "whole"]))
        if use == "none":
            continue
        bound = pod(f"other-{i}", 2 if use == "some" else FEWEST, gates=(),
                    node_name=f"n{i}", phase="Running", resource=DEVICES)
        infos.append(pod_info(asking(bound, use == "whole"), CONFIG, claims=""))
    for gang in ("g", "h")[: draw(st.integers(1, 2))]:
        size = draw(st.integers(1, 4))
        for raw in members(gang, size, gpus=draw(st.sampled_from([1, 2, 4, 8])),
                           resource=DEVICES):
            infos.append(pod_info(asking(raw, draw(st.booleans())), CONFIG, claims=""))
    return nodes, infos, {f"n{i}": c for i, c in enumerate(counts)}


@settings(max_examples=300, deadline=None)
@given(cases())
def test_an_all_member_is_pinned_only_to_a_node_it_takes_whole(
    case: tuple[list[dict[str, Any]], list[PodInfo], dict[str, int]],
) -> None:
    nodes, infos, counts = case
    result = plan(infos, nodes, CONFIG, 0.0)
    # Each node's users of the class: (name, whole, devices the allocator gives it).
    users: dict[str, list[tuple[str, bool, int]]] = {n: [] for n in counts}

    def add(info: PodInfo, where: str) -> None:
        whole = info.demand.get(WHOLE, 0) > 0
        users[where].append((info.name, whole, counts[where] if whole
                             else info.demand.get(DEVICES, 0)))

    for info in infos:
        if info.node_name:
            add(info, info.node_name)
    for release in result.releases:
        pinned = [p for p in release.pods if p.uid in release.pins]
        assert pinned == [] or len(pinned) == len(release.pods), release
        for info in pinned:
            add(info, release.pins[info.uid])
    for where, on in users.items():
        if any(whole for _, whole, _ in on) and any(
                where in r.pins.values() for r in result.releases):
            assert len(on) == 1, (where, on, result.releases)
        if any(where in r.pins.values() for r in result.releases):
            assert sum(d for _, _, d in on) <= counts[where], (where, on)
