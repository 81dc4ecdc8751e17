"""Planning cost follows the cluster linearly: node evaluations per pass, counted.

A planning pass used to compare every member of every gang with every node (pins x
nodes, and a fleet view rebuilt per gang): at 1,000 gangs on 1,000 nodes that was
10 s of CPU, growing with the square of the cluster. These tests count, not time, the
assigner's and the fleet's looks at nodes — each `fits` of a member on a node or a
bucket of interchangeable nodes, each eligibility check of a node — on `bench.load`'s
trace at three sizes, and fail if the count grows faster than the cluster. The
controller's `Planner`, in a pass after one gang's change, must look at no more nodes
at a bigger size: its cost follows what changed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.planning_state import EPOCH, admitted_pods, bound, infos, released, trace
from gangkeeper.policies import Config
from gangkeeper.policies.cluster import fleet as fleet_module
from gangkeeper.policies.cluster.shared_parts import SharedParts
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.planner import Planner
from gangkeeper.policies.release.results import Plan

SIZES = (30, 60, 120)
# The module, not the function `placement.assign` that the package exports.
assign_module = importlib.import_module("gangkeeper.policies.assigner.assign")


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def wrap(self, function: Callable[..., bool]) -> Callable[..., bool]:
        def counted(*args: Any, **kwargs: Any) -> bool:
            self.calls += 1
            return function(*args, **kwargs)

        return counted


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    counter = Counter()
    monkeypatch.setattr(assign_module, "fits", counter.wrap(assign_module.fits))
    monkeypatch.setattr(assign_module, "node_eligible", counter.wrap(assign_module.node_eligible))
    monkeypatch.setattr(fleet_module, "node_eligible", counter.wrap(fleet_module.node_eligible))
    yield counter


def _states(size: int) -> Iterator[tuple[str, Callable[[], Plan]]]:
    config = Config()
    specs, nodes = trace(size)
    pods = admitted_pods(specs, nodes, config)
    now = EPOCH + len(pods) * 0.01 + 5.0
    shared = SharedParts()
    burst = infos(pods, config, shared)
    first = plan(burst, nodes, config, now)
    inflight = infos(released(pods, first, now), config, shared)
    settled = infos(bound(released(pods, first, now), nodes), config, shared)
    yield "burst", lambda: plan(burst, nodes, config, now)
    yield "inflight", lambda: plan(inflight, nodes, config, now + 1)
    yield "settled", lambda: plan(settled, nodes, config, now + 2)


@pytest.mark.parametrize("state", ["burst", "inflight", "settled"])
def test_node_evaluations_per_pass_grow_no_faster_than_the_cluster(
    state: str, evaluations: Counter
) -> None:
    counts = []
    for size in SIZES:
        call = dict(_states(size))[state]
        evaluations.calls = 0
        result = call()
        counts.append(evaluations.calls)
        if state == "burst":
            # The pass must do the work it is counted for: release what fits.
            assert result.releases, size
    # 4x the gangs and nodes: at most 4x the evaluations, and a little for the
    # buckets a bigger fleet has (squared growth would be 16x).
    assert counts[-1] <= 5 * max(counts[0], 1), dict(zip(SIZES, counts, strict=True))


@pytest.mark.parametrize("state", ["burst", "inflight", "settled"])
def test_a_planner_pass_after_one_gang_changed_looks_at_no_more_nodes_when_bigger(
    state: str, evaluations: Counter
) -> None:
    """Burst: the last gang arrives; in flight: the last released gang's patches
    applied; settled: it binds. Each pass from the state a moment before,
    on a planner that planned it: node evaluations of that pass alone."""
    counts = []
    for size in SIZES:
        config = Config()
        specs, nodes = trace(size)
        pods = admitted_pods(specs, nodes, config)
        now = EPOCH + len(pods) * 0.01 + 5.0
        store: dict[tuple[str, str], Any] = {}
        shared = SharedParts()
        burst = infos(pods, config, shared, store)
        first = plan(burst, nodes, config, now)
        inflight = infos(released(pods, first, now), config, shared, store)
        settled = infos(bound(released(pods, first, now), nodes), config, shared, store)
        if state == "burst":
            before, after = [p for p in burst if p.gang != burst[-1].gang], burst
        else:
            earlier, after = (burst, inflight) if state == "inflight" else (inflight, settled)
            moved = [p.gang for p in after if p.gang and (
                p.in_flight if state == "inflight" else p.node_name)][-1]
            was = {p.uid: p for p in earlier if p.gang == moved}
            before = [was.get(p.uid, p) for p in after]
        planner = Planner(config)
        planner.plan(before, nodes, now)
        evaluations.calls = 0
        planner.plan(after, nodes, now)
        counts.append(evaluations.calls)
        assert planner.decided <= 1, (size, planner.decided)
    # 4x the gangs and nodes: no more evaluations than at the smallest size, give or
    # take the buckets a bigger fleet has.
    assert counts[-1] <= 2 * max(counts[0], 10), dict(zip(SIZES, counts, strict=True))
