"""Release as a placement: the plan pins every member of a gate-backend gang to a node
with room for all it requests, in priority order; the write lifts the gate and pins in
one patch."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import pytest
from builders.gangs import T0, members, node, pin, pod

from gangkeeper.policies.assigner import Pin, pin_of
from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.names import GATE, PIN_LABEL
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.release.status import render_json, render_text
from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.controller.writes import ungate_patch

NOW = T0 + 60


def decide(
    pods: list[dict[str, Any]], nodes: list[dict[str, Any]], config: Config | None = None
) -> Plan:
    cfg = config or Config()
    return plan([pod_info(p, cfg) for p in pods if is_live(p)], nodes, cfg, NOW)


def pins(result: Plan) -> dict[str, str]:
    """pod name → node it is pinned to, over every release."""
    return {p.name: r.pins[p.uid] for r in result.releases for p in r.pods if p.uid in r.pins}


def mixed(name: str = "mixed", **kwargs: Any) -> list[dict[str, Any]]:
    """The 8 + 4 + 4 gang of issue 12: exactly fills two 8-GPU nodes."""
    return [
        pod(f"{name}-0", 8, gang=name, min_member=3, **kwargs),
        pod(f"{name}-1", 4, gang=name, min_member=3, created=T0 + 1, **kwargs),
        pod(f"{name}-2", 4, gang=name, min_member=3, created=T0 + 2, **kwargs),
    ]


def with_cpu(raw: dict[str, Any], cpu: str) -> dict[str, Any]:
    raw["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})[
        "cpu"
    ] = cpu
    return raw


def test_the_8_4_4_gang_is_pinned_so_the_4s_share_a_node() -> None:
    result = decide(mixed(), [node("a", 8), node("b", 8)])
    got = pins(result)
    assert set(got) == {"mixed-0", "mixed-1", "mixed-2"}
    assert got["mixed-1"] == got["mixed-2"] != got["mixed-0"]
    report = next(r for r in result.reports if r.label == "mixed")
    assert dict(report.assignment) == got
    assert '"assignment"' in render_json(result.reports)
    text = render_text(result.reports)
    assert f"  nodes: mixed-0 → {got['mixed-0']}, mixed-1 → {got['mixed-1']}" in text


def test_placement_scheduler_lifts_the_gates_without_pins() -> None:
    scheduler = load_config({"placement": "scheduler"})
    result = decide(mixed(), [node("a", 8), node("b", 8)], scheduler)
    assert {p.name for r in result.releases for p in r.pods} == {"mixed-0", "mixed-1", "mixed-2"}
    assert pins(result) == {}


def test_other_backends_are_never_pinned() -> None:
    gang = mixed(backend="coscheduling")
    result = decide(gang, [node("a", 8), node("b", 8)])
    assert result.releases and pins(result) == {}


def test_cpu_not_gpus_decides_where_members_go() -> None:
    # Node a has 8 GPUs but only 64 cores, 60 of them taken: a 8-core member fits b only.
    web = with_cpu(pod("web", 0, gates=(), node_name="a", phase="Running"), "60")
    gang = [with_cpu(p, "8") for p in members("g", 2, gpus=4)]
    result = decide([web, *gang], [node("a", 8), node("b", 8)])
    assert pins(result) == {"g-0": "b", "g-1": "b"}
    # With b's cores taken too, the GPUs are free but the gang waits, and says why.
    busy = with_cpu(pod("batch", 0, gates=(), node_name="b", phase="Running"), "60")
    result = decide([web, busy, *gang], [node("a", 8), node("b", 8)])
    assert result.releases == ()
    report = next(r for r in result.reports if r.label == "g")
    assert report.state == "waiting" and "no assignment" in report.reason
    assert "(16 cpu asked, 8 cpu free on the nodes they may use)" in report.reason


def test_a_cordoned_or_not_ready_node_is_never_chosen() -> None:
    not_ready = node("c", 8)
    not_ready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    nodes = [node("a", 8, unschedulable=True), not_ready, node("b", 8)]
    result = decide(members("g", 2, gpus=4), nodes)
    assert pins(result) == {"g-0": "b", "g-1": "b"}


@pytest.mark.parametrize("hostname", [False, True], ids=["matchFields pin", "hostname pin"])
def test_in_flight_pinned_members_keep_their_room_for_the_next_gang(hostname: bool) -> None:
    # Gang one released pinned to host-a (ungated, unbound): gang two must not be
    # assigned onto the same GPUs — nor when an earlier version pinned gang one by the
    # node's hostname label, which here differs from its name.
    a, b = node("a", 8), node("b", 8)
    a["metadata"]["labels"][PIN_LABEL] = "host-a"
    first = [pin(pod(f"one-{i}", 4, gang="one", min_member=2, gates=()),
                 "host-a" if hostname else "a", hostname=hostname) for i in range(2)]
    second = members("two", 2, gpus=4, created=T0 + 5)
    result = decide([*first, *second], [a, b])
    assert pins(result) == {"two-0": "b", "two-1": "b"}
    report = next(r for r in result.reports if r.label == "one")
    assert dict(report.assignment) == {"one-0": "a", "one-1": "a"}


def test_a_node_without_a_hostname_label_can_be_pinned_to() -> None:
    # The pin names the Node itself (Karpenter's kwok nodes, for one, carry their
    # NodeClaim's name as hostname, or none).
    bare = node("a", 8)
    del bare["metadata"]["labels"][PIN_LABEL]
    assert pins(decide(members("g", 2, gpus=4), [bare])) == {"g-0": "a", "g-1": "a"}


def test_a_users_hostname_pin_is_respected() -> None:
    gang = members("g", 2, gpus=4, selector={PIN_LABEL: "b"})
    result = decide(gang, [node("a", 8), node("b", 8)])
    assert pins(result) == {"g-0": "b", "g-1": "b"}


def test_an_unmodeled_constraint_releases_the_gang_unpinned_and_says_why() -> None:
    gang = mixed()
    gang[1]["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    result = decide(gang, [node("a", 8), node("b", 8)])
    (release,) = result.releases
    assert pins(result) == {} and "hostPort" in release.unpinned
    report = next(r for r in result.reports if r.label == "mixed")
    assert "released unpinned" in report.reason


def test_a_higher_priority_gang_created_later_goes_first() -> None:
    low = members("low", 2, gpus=8)
    high = members("high", 2, gpus=8, created=T0 + 30)
    for raw in high:
        raw["spec"]["priority"] = 1000
    result = decide([*low, *high], [node("a", 8), node("b", 8)])
    assert {r.gang.label for r in result.releases} == {"high"}
    assert [r.label for r in result.reports] == ["high", "low"]
    low_report = result.reports[1]
    assert low_report.state == "waiting"


def test_the_write_lifts_the_gate_and_pins_in_one_patch() -> None:
    raw = pod("m", 4, gang="g", min_member=1, selector={"pool": "a"})
    info = pod_info(raw, Config())
    out = jsonpatch.apply_patch(raw, ungate_patch(info, "node-7"))
    assert GATE not in [g["name"] for g in out["spec"].get("schedulingGates", [])]
    assert out["spec"]["nodeSelector"] == {"pool": "a"}
    assert out["spec"]["affinity"] == pin(copy.deepcopy(raw), "node-7")["spec"]["affinity"]
    assert pin_of(pod_info(out, Config()).placement) == Pin(node="node-7")
    plain = jsonpatch.apply_patch(raw, ungate_patch(info))
    assert plain["spec"]["nodeSelector"] == {"pool": "a"} and "affinity" not in plain["spec"]


def test_in_a_gpu_gang_members_without_gpus_are_not_pinned_in_a_cpu_gang_they_are() -> None:
    launcher = pod("job-launcher", 0, gang="job", min_member=3)
    workers = [pod(f"job-w{i}", 8, gang="job", min_member=3, created=T0 + 1 + i) for i in range(2)]
    result = decide([launcher, *workers], [node("a", 8), node("b", 8)])
    assert set(pins(result)) == {"job-w0", "job-w1"}
    assert {p.name for r in result.releases for p in r.pods} == {
        "job-launcher", "job-w0", "job-w1"}
    cpu_only = members("cpu", 3, gpus=0)
    result = decide(cpu_only, [node("a", 8)])
    assert {p.name for r in result.releases for p in r.pods} == {"cpu-0", "cpu-1", "cpu-2"}
    assert pins(result) == {"cpu-0": "a", "cpu-1": "a", "cpu-2": "a"}
