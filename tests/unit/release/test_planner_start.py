"""The start a planner keeps between passes (`KeptFleet`) is the start a pass from
scratch makes: devices that claims hold count on their node, and pods in flight are
placed in one order whatever order the caller lists them in. Each case was found by a
review of the incremental planner; both failed before their fix."""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies import Config
from gangkeeper.policies.cluster import kept_fleet
from gangkeeper.policies.cluster.observed_gangs import PodInfo, pod_info
from gangkeeper.policies.model import HELD_BY_CLAIMS
from gangkeeper.policies.names import (
    GANG_LABEL,
    GANG_NAME_ANNOTATION,
    GATE,
    MIN_MEMBER_ANNOTATION,
    PIN_LABEL,
)
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.planner import Planner, decisions
from gangkeeper.policies.release.results import Plan

GPU = "nvidia.com/gpu"
T = "2027-01-15T08:00:00Z"
T2 = "2027-01-15T08:00:05Z"
NOW = 1_900_000_000.0
CONFIG = Config()


def node(name: str, gpus: int, held: int = 0) -> dict[str, Any]:
    cap = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    status: dict[str, Any] = {"capacity": cap, "allocatable": dict(cap)}
    if held:
        status[HELD_BY_CLAIMS] = {GPU: held}
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": {PIN_LABEL: name}},
            "spec": {}, "status": status}


def in_flight(namespace: str, name: str, gpus: int, created: str = T, *,
              pinned_to: str = "", team: str = "") -> PodInfo:
    """A pod of no gang, free to schedule and not bound; pinned by hostname if asked,
    tolerating a taint of its `team` (a placement of its own) if given."""
    res = {"requests": {GPU: str(gpus), "cpu": "1"}, "limits": {GPU: str(gpus)}}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": res}]}
    if pinned_to:
        spec["nodeSelector"] = {PIN_LABEL: pinned_to}
    if team:
        spec["tolerations"] = [{"key": "team", "value": team, "effect": "NoSchedule"}]
    uid = f"{namespace}-{name}"
    return pod_info({"metadata": {"name": name, "namespace": namespace, "uid": uid,
                                  "resourceVersion": "1", "creationTimestamp": created},
                     "spec": spec, "status": {}}, CONFIG)


def gated_member(gpus: int) -> PodInfo:
    res = {"requests": {GPU: str(gpus), "cpu": "1"}, "limits": {GPU: str(gpus)}}
    return pod_info({"metadata": {"name": "g-0", "namespace": "ns", "uid": "g-0",
                                  "resourceVersion": "1", "creationTimestamp": T,
                                  "labels": {GANG_LABEL: "g"},
                                  "annotations": {GANG_NAME_ANNOTATION: "g",
                                                  MIN_MEMBER_ANNOTATION: "1"}},
                     "spec": {"schedulingGates": [{"name": GATE}],
                              "containers": [{"name": "c", "resources": res}]},
                     "status": {}}, CONFIG)


def states(result: Plan) -> list[str]:
    return [r.state for r in result.reports]


def test_a_pinned_pod_in_flight_is_counted_beside_the_devices_claims_hold() -> None:
    nodes = [node("n0", 8, held=2)]  # 8 GPUs, 2 held by allocated claims
    x, g = in_flight("other", "x", 4, pinned_to="n0"), gated_member(2)
    planner = Planner(CONFIG)
    first = planner.plan([x, g], nodes, NOW)  # 2 held + 4: the gang's 2 fit
    assert decisions(first) == decisions(plan([x, g], nodes, CONFIG, NOW))
    # y (4, younger) pinned to n0 does not fit beside them (2 + 4 + 4 > 8), so the
    # gang's 2 still do; a start that forgot the held 2 placed y and held the gang.
    y = in_flight("other", "y", 4, created=T2, pinned_to="n0")
    ours, fresh = planner.plan([x, g, y], nodes, NOW + 1), plan([x, g, y], nodes, CONFIG, NOW + 1)
    assert states(fresh) == ["releasing"]
    assert decisions(ours) == decisions(fresh)


def test_pods_in_flight_tied_on_creation_and_name_are_placed_alike_in_any_listed_order() -> None:
    nodes = [node("n0", 8), node("n1", 4)]
    # Two pods named "w" in two namespaces, created in the same second, each free to
    # take either node: first-fit in list order would place them differently.
    p, q, g = in_flight("a", "w", 4), in_flight("b", "w", 8), gated_member(4)
    planner = Planner(CONFIG)
    first = planner.plan([p, q, g], nodes, NOW)
    assert decisions(first) == decisions(plan([p, q, g], nodes, CONFIG, NOW))
    # A relist hands the same pods in another order: nothing changed, nothing moves.
    ours, fresh = planner.plan([q, p, g], nodes, NOW + 1), plan([q, p, g], nodes, CONFIG, NOW + 1)
    assert states(fresh) == states(first)
    assert decisions(ours) == decisions(fresh)


def test_the_memo_of_placements_is_bounded_by_what_is_live(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kept while the nodes do not change, the memo would grow by every distinct
    # placement ever seen; past twice what its last rebuild needed the start is
    # rebuilt and the memo with it.
    monkeypatch.setattr(kept_fleet, "_MEMO_FLOOR", 0)
    nodes, g = [node("n0", 64)], gated_member(1)
    planner = Planner(CONFIG)
    for i in range(12):
        # One pod in flight at a time, each with a placement of its own.
        pods = [g, in_flight("other", f"p{i}", 1, pinned_to="n0", team=f"t{i}")]
        ours = planner.plan(pods, nodes, NOW + i)
        assert decisions(ours) == decisions(plan(pods, nodes, CONFIG, NOW + i))
        assert len(planner._fleet._targets) <= 4, i


def test_one_pin_per_node_stays_within_the_memo_and_a_pass_with_nothing_changed_keeps_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Released members are pinned one placement per node, so a fleet of N nodes needs
    # N placements in the memo in its steady state. A memo bounded without the nodes
    # rebuilt the whole start on the pass after the gangs were released, with nothing
    # changed (at 5,000 nodes, 1.7 s of a pass that otherwise takes 0.1 s).
    monkeypatch.setattr(kept_fleet, "_MEMO_FLOOR", 0)
    nodes, g = [node(f"n{i}", 8) for i in range(6)], gated_member(1)
    planner = Planner(CONFIG)
    planner.plan([g], nodes, NOW)
    pods = [g, *(in_flight("other", f"p{i}", 1, pinned_to=f"n{i}") for i in range(6))]
    planner.plan(pods, nodes, NOW + 1)
    again = planner.plan(pods, nodes, NOW + 2)
    assert decisions(again) == decisions(plan(pods, nodes, CONFIG, NOW + 2))
    assert planner._fleet.replaced == 0, "the start was rebuilt with nothing changed"
