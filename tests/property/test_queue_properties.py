"""Queue positions hold together for every mix of waiting gangs.

`places` on random node sets against the definition (1 + the earlier gangs whose nodes
meet its own), and the plan on random gangs (priorities, ages, pools) over a small
fleet: positions run 1..n among gangs waiting for the same nodes, no two alike, and a
gang never has a lower-priority gang ahead of it.
"""

from __future__ import annotations

from typing import Any

from builders.gangs import T0, members, node, pod
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.release.queue import AHEAD_SHOWN, places
from gangkeeper.policies.release.status import gang_status
from gangkeeper.policies.settings.config import Config

node_sets = st.lists(st.frozensets(st.sampled_from("abcdef"), max_size=4), max_size=14)


def meet(a: frozenset[str], b: frozenset[str]) -> bool:
    return a == b or not a.isdisjoint(b)


@given(node_sets)
def test_places_follow_the_definition(sets: list[frozenset[str]]) -> None:
    found = places((i, f"t/{i}", nodes) for i, nodes in enumerate(sets))
    assert set(found) == set(range(len(sets)))
    for i, nodes in enumerate(sets):
        earlier = [j for j in range(i) if meet(sets[j], nodes)]
        place = found[i]
        assert place.position == 1 + len(earlier)
        assert place.length == sum(1 for other in sets if meet(other, nodes))
        assert place.ahead == tuple(f"t/{j}" for j in earlier[:AHEAD_SHOWN])


@given(node_sets)
def test_gangs_waiting_for_the_same_nodes_have_positions_one_to_n(
    sets: list[frozenset[str]],
) -> None:
    found = places((i, f"t/{i}", nodes) for i, nodes in enumerate(sets))
    for nodes in set(sets):
        same = [found[i].position for i, other in enumerate(sets) if other == nodes]
        assert same == sorted(set(same))  # strictly increasing in queue order
        if all(meet(other, nodes) == (other == nodes) for other in sets):
            assert same == list(range(1, len(same) + 1))  # a queue of their own


POOLS = {"x": {"pool": "x"}, "y": {"pool": "y"}, "any": None}

gangs = st.lists(
    st.tuples(
        st.sampled_from(sorted(POOLS)),  # where it may run
        st.sampled_from([0, 50, 100]),  # priority
        st.integers(0, 300),  # created, seconds after T0
        st.integers(1, 6),  # members of one GPU
    ),
    min_size=1, max_size=10,
)


@settings(max_examples=60, deadline=None)
@given(gangs)
def test_the_plan_never_puts_a_gang_behind_a_lower_priority_one(
    specs: list[tuple[str, int, int, int]],
) -> None:
    pods: list[dict[str, Any]] = [pod("busy", 3, namespace="other", gates=(), node_name="a")]
    for index, (pool, priority, created, size) in enumerate(specs):
        gang = members(f"g{index}", size, created=T0 + created, selector=POOLS[pool])
        for raw in gang:
            raw["spec"]["priority"] = priority
        pods += gang
    nodes = [node("a", 4, labels={"pool": "x"}), node("b", 2, labels={"pool": "x"}),
             node("c", 3, labels={"pool": "y"})]
    reports = gang_status(pods, nodes, Config(), T0 + 400)
    order = {f"{r.namespace}/{r.name}": i for i, r in enumerate(reports)}
    pool_of = {f"team/g{i}": spec[0] for i, spec in enumerate(specs)}
    queued = [r for r in reports if r.queue_position is not None]
    by_name = {f"{r.namespace}/{r.name}": r for r in queued}
    for r in queued:
        me = f"{r.namespace}/{r.name}"
        # Pool x and pool y share no node; a gang of no pool may use every node.
        rivals = [o for o in queued
                  if "any" in {pool_of[f"team/{o.name}"], pool_of[me]}
                  or pool_of[f"team/{o.name}"] == pool_of[me]]
        assert r.queue_length == len(rivals)
        assert r.queue_position == 1 + sum(
            1 for o in rivals if order[f"{o.namespace}/{o.name}"] < order[me])
        assert len(r.ahead) == min(r.queue_position - 1, AHEAD_SHOWN)
        for name in r.ahead:
            ahead = by_name[name]
            assert order[name] < order[me]
            assert ahead.priority >= r.priority
            # Pools x and y share no node: never ahead of one another.
            assert {pool_of[name], pool_of[me]} != {"x", "y"}
    for pool in POOLS:
        same = [r.queue_position for r in queued if pool_of[f"team/{r.name}"] == pool]
        assert same == sorted(set(same)), pool
    # A higher-priority gang waiting for the same pool is always ahead.
    for r in queued:
        for other in queued:
            if (pool_of[f"team/{other.name}"] == pool_of[f"team/{r.name}"]
                    and other.priority > r.priority):
                assert other.queue_position is not None and r.queue_position is not None
                assert other.queue_position < r.queue_position
