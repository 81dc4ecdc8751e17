"""For every fleet, every load on it and every gang without GPUs: the plan releases the
gang only whole, with every member pinned to a node that, with what is bound there and
the members pinned beside it, has room for all each member asks (cpu, memory, the pod
slot); and a small gang that some assignment would fit is released (the assigner is
exact for small gangs)."""

from __future__ import annotations

from itertools import product
from typing import Any

from builders.gangs import T0, members, plain_node, pod, requesting
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import Config

CFG = Config()
MI = 2**20

#: (cpu cores, memory Mi, pod slots) of each node.
nodes_st = st.lists(
    st.tuples(st.integers(1, 8), st.integers(100, 600), st.integers(1, 4)),
    min_size=1, max_size=4,
)
#: (node index, cpu millicores, memory Mi) of pods already running.
load_st = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4000), st.integers(0, 300)),
                   max_size=4)
#: (cpu millicores, memory Mi) of each member.
gang_st = st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 300)), min_size=1, max_size=4)


def node_dict(index: int, cpu: int, memory: int, slots: int) -> dict[str, Any]:
    raw = plain_node(f"n{index}", cpu=str(cpu), memory=f"{memory}Mi")
    raw["status"]["allocatable"]["pods"] = str(slots)
    return raw


def cluster(
    nodes: list[tuple[int, int, int]], load: list[tuple[int, int, int]],
    gang: list[tuple[int, int]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    node_dicts = [node_dict(i, *shape) for i, shape in enumerate(nodes)]
    running = []
    for i, (where, cpu, memory) in enumerate(load):
        if where < len(nodes):
            raw = pod(f"busy-{i}", 0, gates=(), node_name=f"n{where}", phase="Running")
            running.append(requesting([raw], cpu=f"{cpu}m", memory=f"{memory}Mi")[0])
    gated = members("c", len(gang), gpus=0)
    for raw, (cpu, memory) in zip(gated, gang, strict=True):
        requesting([raw], cpu=f"{cpu}m", memory=f"{memory}Mi")
    return node_dicts, [*running, *gated]


def free_of(
    nodes: list[tuple[int, int, int]], load: list[tuple[int, int, int]]
) -> list[list[int]]:
    free = [[cpu * 1000, memory, slots] for cpu, memory, slots in nodes]
    for where, cpu, memory in load:
        if where < len(nodes):
            free[where][0] -= cpu
            free[where][1] -= memory
            free[where][2] -= 1
    # A node over what it has (allocatable shrank) has nothing free: a member asking
    # none of a resource still fits there, as the scheduler's NodeResourcesFit says.
    return [[max(0, amount) for amount in f] for f in free]


def some_assignment(free: list[list[int]], gang: list[tuple[int, int]]) -> bool:
    """Brute force: whether the members fit the free room in some assignment."""
    for choice in product(range(len(free)), repeat=len(gang)):
        left = [list(f) for f in free]
        for (cpu, memory), where in zip(gang, choice, strict=True):
            left[where][0] -= cpu
            left[where][1] -= memory
            left[where][2] -= 1
        if all(c >= 0 and m >= 0 and s >= 0 for c, m, s in left):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(nodes_st, load_st, gang_st)
def test_a_cpu_gang_is_released_only_whole_onto_nodes_with_room_for_every_member(
    nodes: list[tuple[int, int, int]], load: list[tuple[int, int, int]],
    gang: list[tuple[int, int]],
) -> None:
    node_dicts, pods = cluster(nodes, load, gang)
    result = plan([pod_info(p, CFG) for p in pods if is_live(p)], node_dicts, CFG, T0 + 60)
    released = [p for r in result.releases if r.gang.label == "c" for p in r.pods]
    pins = {p.name: r.pins.get(p.uid) for r in result.releases for p in r.pods}
    free = free_of(nodes, load)
    if released:
        assert len(released) == len(gang)  # whole, never in part
        left = [list(f) for f in free]
        for i, (cpu, memory) in enumerate(gang):
            host = pins[f"c-{i}"]
            assert host is not None, "every member is pinned"
            where = int(host[1:])
            left[where][0] -= cpu
            left[where][1] -= memory
            left[where][2] -= 1
        for cpu, memory, slots in left:
            assert cpu >= 0 and memory >= 0 and slots >= 0, "no node over what it has"
    else:
        assert not some_assignment(free, gang), "a gang that fits is released"
