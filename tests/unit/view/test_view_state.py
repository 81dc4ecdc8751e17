"""`gangkeeper view`'s snapshot from plain dicts: each waiting gang's place among the
gangs waiting for the same room, what stands out, and the fleet as GPU cells."""

from __future__ import annotations

from builders.gangs import T0, members, node, pod
from builders.preemption import budget, running_pod, waiting_gang
from builders.view_cluster import X, queue_cluster

from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.resources import BUDGETS
from gangkeeper.webhook.view.source import reader
from gangkeeper.webhook.view.state import QueueRow, build, explain_text

NOW = T0 + 60


def rows() -> dict[str, QueueRow]:
    pods, nodes = queue_cluster()
    return {r.name: r for r in build(pods, nodes, Config(), NOW).rows}


def test_position_is_among_gangs_waiting_for_overlapping_nodes_by_priority_then_age() -> None:
    found = rows()
    places = {name: (r.position, r.queue_length, r.ahead) for name, r in found.items()}
    assert places["urgent"] == (1, 3, ())
    assert places["first"] == (2, 3, ("team/urgent",))
    assert places["second"] == (3, 3, ("team/urgent", "team/first"))
    # Pool y shares no node with pool x: a queue of its own.
    assert places["third"] == (1, 1, ())


def test_gangs_that_do_not_wait_for_room_have_no_position_but_keep_their_reason() -> None:
    found = rows()
    few = found["few"]
    assert (few.position, few.state, few.reason) == (None, "waiting", "1 of 4 members exist")
    assert found["done"].position is None


def test_released_gangs_partly_bound_or_not_ready_are_flagged() -> None:
    found = rows()
    assert found["partial"].flags == ("partly bound (1 of 2)",)
    assert found["done"].flags == ("not Ready (0 of 2)",)
    assert found["urgent"].flags == ()


def test_a_gang_waiting_past_the_timeout_shows_as_stuck() -> None:
    pods, nodes = queue_cluster()
    state = build(pods, nodes, load_config({"gangTimeoutSeconds": 45}), NOW)
    first = next(r for r in state.rows if r.name == "first")
    assert first.state == "stuck" and "stuck" in first.flags
    assert first in state.rows_where(state="waiting")


def test_filters_by_namespace_and_state() -> None:
    pods, nodes = queue_cluster()
    state = build(pods, nodes, Config(), NOW)
    assert [r.name for r in state.rows_where("lab")] == ["third"]
    # A gang not all bound is still releasing (status never calls it released).
    assert {r.name for r in state.rows_where(state="released")} == {"done"}
    assert "partial" in {r.name for r in state.rows_where(state="releasing")}
    assert not state.rows_where("lab", "released")


def test_fleet_cells_say_who_holds_each_gpu_and_which_are_held_for_a_waiting_gang() -> None:
    pods, nodes = queue_cluster()
    fleet = build(pods, nodes, Config(), NOW).fleet
    cells = {n.name: [(c.kind, c.who, c.coming) for c in n.cells] for n in fleet.nodes}
    assert cells["a"] == [("other", "other/busy", False)] * 3 + [("held", "team/urgent", False)]
    assert cells["b"] == [("gang", "team/done", False)] * 2 + [("held", "team/urgent", False)] * 2
    # partial's unbound member is counted where the plan places it; third can never
    # fit, so it holds nothing.
    assert cells["c"] == [("gang", "team/partial", False), ("gang", "team/partial", True),
                          ("free", "", False), ("free", "", False)]
    assert fleet.totals() == {"gang": 4, "other": 3, "placeholder": 0, "held": 3, "free": 2}


def test_fleet_marks_cordoned_and_tainted_nodes_and_groups_by_topology() -> None:
    nodes = [
        node("n1", 2, labels={"rack": "r2"}, unschedulable=True),
        node("n2", 2, labels={"rack": "r1"},
             taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]),
        node("n3", 2),
    ]
    fleet = build([], nodes, load_config({"topology": ["rack"]}), NOW).fleet
    assert fleet.topology_key == "rack"
    assert [(n.domain, n.name) for n in fleet.nodes] == [("", "n3"), ("r1", "n2"), ("r2", "n1")]
    by_name = {n.name: n for n in fleet.nodes}
    assert by_name["n1"].cordoned and not by_name["n1"].taints
    assert by_name["n2"].taints == ("gpu=a100:NoSchedule",)


def test_a_large_fleet_is_summed_per_node_shape() -> None:
    nodes = [node(f"big-{i}", 8) for i in range(5)] + [node(f"small-{i}", 2) for i in range(3)]
    pods = [pod("job", 8, gates=(), node_name="big-0")]
    fleet = build(pods, nodes, Config(), NOW, aggregate_above=4).fleet
    assert fleet.aggregated
    shapes = {s.shape: (s.nodes, s.gpus, dict(s.counts)) for s in fleet.shapes}
    assert shapes == {
        "8 x nvidia.com/gpu": (5, 40, {"other": 8, "free": 32}),
        "2 x nvidia.com/gpu": (3, 6, {"free": 6}),
    }
    assert not build(pods, nodes, Config(), NOW).fleet.aggregated


def test_members_say_where_they_are_or_why_not_and_the_owner_is_named() -> None:
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js",
             "uid": "u"}
    pods = members("g", 2, owner=owner, selector=X)
    state = build(pods, [node("a", 1, labels=X)], Config(), NOW)
    detail = state.details[("team", "g")]
    assert [(m.name, m.node, m.status) for m in detail.members] == [
        ("g-0", "", "gated: the gang is waiting (no-fit)"),
        ("g-1", "", "gated: the gang is waiting (no-fit)"),
    ]
    assert detail.owner is not None and detail.owner.resource == "jobset.jobset.x-k8s.io"
    assert detail.target == "jobset/js"
    text = explain_text(state, ("team", "g"))
    assert text.startswith("Name:         team/g\n") and "Owner:        JobSet/js" in text


def test_events_of_a_gang_are_those_about_its_pods_or_owner() -> None:
    pods = members("g", 1)
    events = [
        {"metadata": {"namespace": "team"}, "regarding": {"kind": "Pod", "name": "g-0"},
         "reason": "Waiting", "note": "mine"},
        {"metadata": {"namespace": "team"}, "regarding": {"kind": "Pod", "name": "other"},
         "reason": "X", "note": "not mine"},
        {"metadata": {"namespace": "elsewhere"}, "regarding": {"kind": "Pod", "name": "g-0"},
         "reason": "X", "note": "same name, other namespace"},
    ]
    state = build(pods, [node("a", 1)], Config(), NOW, events=events)
    assert [e["note"] for e in state.events_of(("team", "g"))] == ["mine"]


def _guarded_cluster() -> FakeApi:
    """One 8-GPU node held by a pod a PodDisruptionBudget protects; a higher gang waits."""
    api = FakeApi()
    api.seed("/api/v1/nodes", node("n0", 8))
    api.seed("/api/v1/pods", running_pod("guarded", "n0", 8, 5, labels={"app": "db"}),
             *waiting_gang("high", 1, 8, 1000))
    api.seed(BUDGETS.path, budget("db", {"app": "db"}, 0))
    return api


def test_the_view_names_the_budget_that_keeps_a_gang_from_preempting() -> None:
    """As `status` and `explain` do: the view's plan reads the cluster's budgets."""
    state = reader(_guarded_cluster(), Config(), clock=lambda: NOW)()
    (row,) = [r for r in state.rows if r.label == "high"]
    assert "PodDisruptionBudget team/db allows no more disruptions" in row.reason
    assert "PodDisruptionBudget team/db" in explain_text(state, row.key)


def test_budgets_the_user_may_not_list_leave_the_rest_of_the_view_answering() -> None:
    api = _guarded_cluster()
    api.absent.add(BUDGETS.path)  # answered 404, as a 403 is answered alike
    state = reader(api, Config(), clock=lambda: NOW)()
    (row,) = [r for r in state.rows if r.label == "high"]
    assert row.state == "waiting" and "PodDisruptionBudget" not in row.reason
