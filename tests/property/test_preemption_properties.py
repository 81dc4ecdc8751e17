"""Preemption's rules for all small fleets, against brute force: the victims chosen for a
waiting gang make room for it (the plan releases it once they are gone), none can be
given back, the set ranks best of every set that makes room (kube-scheduler's order),
a gang is never split, and no victim has the preemptor's priority or runs only on
nodes the preemptor may not use. And when nothing is preempted, no set would make room."""

from __future__ import annotations

import itertools
from typing import Any

from builders.gangs import T0, node
from builders.preemption import planned, running_gang, running_pod, waiting_gang
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.preemption import Unit, rank
from gangkeeper.policies.settings.config import Config

Pod = dict[str, Any]


@st.composite
def scenes(draw: st.DrawFn) -> tuple[list[Pod], list[list[Pod]], list[Pod], str | None]:
    """Nodes, running units (each a list of pods), the waiting gang, its pool."""
    sizes = draw(st.lists(st.sampled_from([2, 4, 8]), min_size=1, max_size=3))
    nodes = [node(f"n{i}", g, labels={"pool": "ab"[i % 2]}) for i, g in enumerate(sizes)]
    free = dict(enumerate(sizes))
    units: list[list[Pod]] = []
    for index in range(draw(st.integers(1, 6))):
        priority = draw(st.sampled_from([0, 10, 20]))
        started = T0 + draw(st.integers(0, 3)) * 60
        width = draw(st.integers(1, 2))
        gpus = draw(st.sampled_from([1, 2, 4]))
        homes = [i for i, left in free.items() if left >= gpus]
        if not homes:
            break
        where = [draw(st.sampled_from(homes))]
        if width == 2:
            others = [i for i in homes if i != where[0] or free[i] >= 2 * gpus]
            if others:
                where.append(draw(st.sampled_from(others)))
        for i in where:
            free[i] -= gpus
        names = [f"n{i}" for i in where]
        if draw(st.booleans()):
            units.append(running_gang(f"g{index}", names, gpus, priority, started=started))
        else:
            units.append([running_pod(f"p{index}", names[0], gpus, priority, started=started)])
    pool = draw(st.sampled_from([None, "a"]))
    high = waiting_gang(
        "high", draw(st.integers(1, 3)), draw(st.sampled_from([1, 2, 4])),
        draw(st.sampled_from([10, 20, 30])),
        **({"selector": {"pool": pool}} if pool else {}),
    )
    return nodes, units, high, pool


def _released(nodes: list[Pod], pods: list[Pod], high: list[Pod]) -> bool:
    result = planned([*pods, *high], nodes)
    return any(r.gang.label == "high" for r in result.releases)


def _unit(pods: list[Pod]) -> Unit:
    infos = tuple(pod_info(p, Config()) for p in pods)
    gang = bool(infos[0].gang)
    return Unit(infos, max(p.priority for p in infos), "suspend" if gang else "evict")


@settings(max_examples=120, deadline=None)
@given(scenes())
def test_the_victims_are_the_best_set_that_makes_room(
    scene: tuple[list[Pod], list[list[Pod]], list[Pod], str | None],
) -> None:
    nodes, units, high, pool = scene
    everything = [p for unit in units for p in unit]
    result = planned([*everything, *high], nodes)
    if any(r.gang.label == "high" for r in result.releases):
        return  # it fits without anyone going
    usable = {n["metadata"]["name"] for n in nodes
              if pool is None or n["metadata"]["labels"]["pool"] == pool}
    priority = high[0]["spec"]["priority"]
    candidates = [
        u for u in units
        if u[0]["spec"]["priority"] < priority and any(p["spec"]["nodeName"] in usable for p in u)
    ]

    def makes_room(chosen: tuple[list[Pod], ...]) -> bool:
        gone = {p["metadata"]["uid"] for u in chosen for p in u}
        return _released(nodes, [p for p in everything if p["metadata"]["uid"] not in gone],
                         high)

    feasible = [
        combo
        for size in range(1, len(candidates) + 1)
        for combo in itertools.combinations(candidates, size)
        if makes_room(combo)
    ]
    if not feasible:
        assert result.preemptions == ()
        return
    (found,) = result.preemptions
    chosen_uids = {p.uid for p in found.pods}
    chosen = tuple(u for u in candidates if u[0]["metadata"]["uid"] in chosen_uids)
    # Units whole: every pod of a chosen unit is a victim, and nothing else is.
    assert chosen_uids == {p["metadata"]["uid"] for u in chosen for p in u}
    assert all(v.priority < priority for v in found.victims)
    assert all(any(p.node_name in usable for p in v.pods) for v in found.victims)
    assert makes_room(chosen)
    for unit in chosen:
        assert len(chosen) == 1 or not makes_room(tuple(u for u in chosen if u is not unit))
    best = min(rank([_unit(u) for u in combo], ()) for combo in feasible)
    assert rank([_unit(u) for u in chosen], ()) == best
