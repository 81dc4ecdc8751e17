"""Reading gang state back from pods: the controller remembers nothing else."""

from __future__ import annotations

import pytest
from builders.gangs import T0, members, pod

from gangkeeper.policies.cluster.observed_gangs import is_live, observe_gangs, parse_time, pod_info
from gangkeeper.policies.names import GATE
from gangkeeper.policies.settings.config import Config

CFG = Config()


def test_a_gang_pod_is_read_with_its_gang_keys_gates_and_demand() -> None:
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1"}
    info = pod_info(pod("w0", 2, gang="g", min_member=4, backend="volcano", owner=owner,
                        gates=("a.io/x", GATE)), CFG)
    assert (info.gang, info.min_member, info.backend, info.role) == ("g", 4, "volcano", "worker")
    assert info.gates == ("a.io/x", GATE)
    assert info.gated and not info.bound and not info.in_flight
    assert dict(info.demand) == {"nvidia.com/gpu": 2}
    assert info.owner is not None and (info.owner.kind, info.owner.uid) == ("Job", "u1")


@pytest.mark.parametrize(
    ("gates", "node_name", "in_flight"),
    [((), "", True), ((), "n1", False), (("other.io/x",), "", False), ((GATE,), "", False)],
)
def test_only_ungated_unbound_pods_are_in_flight(
    gates: tuple[str, ...], node_name: str, in_flight: bool
) -> None:
    assert pod_info(pod("p", gates=gates, node_name=node_name), CFG).in_flight is in_flight


def test_a_malformed_spec_is_recorded_not_raised() -> None:
    raw = pod("bad", gang="g", min_member=1)
    raw["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "lots"
    info = pod_info(raw, CFG)
    assert "nvidia.com/gpu" in info.problem
    [gang] = observe_gangs([info], CFG)
    assert "pod bad cannot be read" in gang.problem


@pytest.mark.parametrize(("phase", "live"), [
    ("Pending", True), ("Running", True), ("Succeeded", False), ("Failed", False),
])
def test_finished_pods_are_not_live(phase: str, live: bool) -> None:
    assert is_live(pod("p", phase=phase)) is live


def test_a_pod_being_deleted_still_holds_gpus_but_is_no_member() -> None:
    raw = pod("p", 2, gang="g", min_member=1, node_name="n1", deleting=True)
    assert is_live(raw)
    info = pod_info(raw, CFG)
    assert info.deleting and info.bound
    assert observe_gangs([info], CFG) == []


def test_gangs_come_oldest_first_and_members_in_creation_order() -> None:
    pods = members("late", 2, created=T0 + 50) + list(reversed(members("early", 3, created=T0)))
    gangs = observe_gangs([pod_info(p, CFG) for p in pods], CFG)
    assert [g.label for g in gangs] == ["early", "late"]
    assert [m.name for m in gangs[0].members] == ["early-0", "early-1", "early-2"]
    assert gangs[0].arrived == T0


def test_members_that_disagree_on_the_backend_are_reported() -> None:
    pods = members("g", 2, backend="gate")
    pods[1]["metadata"]["annotations"]["gangkeeper.io/backend"] = "volcano"
    [gang] = observe_gangs([pod_info(p, CFG) for p in pods], CFG)
    assert "disagree" in gang.problem


@pytest.mark.parametrize(("text", "seconds"), [
    ("2027-01-15T08:00:00Z", 1_800_000_000.0), ("", 0.0), (None, 0.0), ("garbage", 0.0),
])
def test_timestamps_parse_or_fall_back_to_zero(text: object, seconds: float) -> None:
    assert parse_time(text) == seconds
