"""A waiting gang's place in the queue for the nodes it may use: the plan gives it
(`GangReport.queue_position`, `ahead`), `status` prints it, `explain` says it, and the
controller exposes it as a gauge."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from builders.gangs import T0, members, node, plain_node, pod, requesting

from gangkeeper.policies.release.explain import Target, explain, render
from gangkeeper.policies.release.queue import AHEAD_SHOWN, ordinal, places
from gangkeeper.policies.release.results import GangReport
from gangkeeper.policies.release.status import gang_status, render_json
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller import timings
from gangkeeper.webhook.controller.timings import queue_samples

X, Y = {"pool": "x"}, {"pool": "y"}
NOW = T0 + 100


def gang(name: str, size: int, created: float, priority: int = 0, **kwargs: Any) -> list[
    dict[str, Any]
]:
    pods = members(name, size, created=created, **kwargs)
    for raw in pods:
        raw["spec"]["priority"] = priority
    return pods


def pools() -> list[dict[str, Any]]:
    """Pool x: nodes a, b (4 GPUs each), 3 taken on a; pool y: node c (4 GPUs)."""
    return [node("a", 4, labels=X), node("b", 4, labels=X), node("c", 4, labels=Y)]


def busy() -> dict[str, Any]:
    return pod("busy", 3, namespace="other", gates=(), node_name="a")


def queue(pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None) -> dict[
    str, tuple[int | None, int, tuple[str, ...]]
]:
    reports = gang_status(pods, pools() if nodes is None else nodes, Config(), NOW)
    return {r.name: (r.queue_position, r.queue_length, r.ahead) for r in reports}


def test_gangs_waiting_for_one_pool_queue_by_age_within_a_priority() -> None:
    found = queue([busy(), *gang("first", 8, T0, selector=X),
                   *gang("second", 8, T0 + 10, selector=X),
                   *gang("third", 8, T0 + 20, selector=X)])
    assert found == {
        "first": (1, 3, ()),
        "second": (2, 3, ("team/first",)),
        "third": (3, 3, ("team/first", "team/second")),
    }


def test_a_higher_priority_gang_is_ahead_of_older_lower_ones() -> None:
    found = queue([busy(), *gang("old", 8, T0, selector=X),
                   *gang("urgent", 8, T0 + 50, priority=100, selector=X)])
    assert found["urgent"] == (1, 2, ())
    assert found["old"] == (2, 2, ("team/urgent",))


def test_gangs_on_disjoint_pools_have_separate_queues() -> None:
    found = queue([busy(), *gang("on-x", 8, T0, selector=X), *gang("on-y", 6, T0 + 1,
                                                                      selector=Y)])
    assert found["on-x"] == (1, 1, ())
    assert found["on-y"] == (1, 1, ())


def test_overlap_is_not_transitive() -> None:
    # `both` may use every node; `on-y` overlaps it, not `on-x`.
    found = queue([busy(), *gang("on-x", 8, T0, selector=X), *gang("both", 12, T0 + 1),
                   *gang("on-y", 6, T0 + 2, selector=Y)])
    assert found["on-x"] == (1, 2, ())
    assert found["both"] == (2, 3, ("team/on-x",))
    assert found["on-y"] == (2, 2, ("team/both",))


def test_gangs_that_do_not_wait_for_room_are_in_no_queue() -> None:
    found = queue([
        busy(),
        *gang("few", 4, T0)[:1],  # waits for members
        *gang("fits", 2, T0 + 1, selector=Y),  # released
        *gang("waits", 8, T0 + 2, selector=X),
    ])
    assert found["few"] == (None, 0, ())
    assert found["fits"] == (None, 0, ())
    # Neither of the others counts in its queue.
    assert found["waits"] == (1, 1, ())


def test_a_gang_that_can_never_fit_still_counts_ahead_of_those_after_it() -> None:
    # `huge` can never fit (it holds nothing), but it waits for the same nodes first.
    found = queue([busy(), *gang("huge", 12, T0, selector=X),
                   *gang("next", 6, T0 + 1, selector=X)])
    assert found["huge"] == (1, 2, ())
    assert found["next"] == (2, 2, ("team/huge",))


def test_a_gang_without_gpus_queues_with_the_gangs_on_the_nodes_it_may_use() -> None:
    nodes = [plain_node("p1", memory="300Mi"), plain_node("p2", memory="300Mi")]
    first = requesting(gang("first", 2, T0, gpus=0), memory="200Mi")
    second = requesting(gang("second", 4, T0 + 1, gpus=0), memory="200Mi")
    blocker = requesting([pod("blocker", 0, gates=(), node_name="p1")], memory="200Mi")
    found = queue([*blocker, *first, *second], nodes)
    assert found["first"] == (1, 2, ())
    assert found["second"] == (2, 2, ("team/first",))


def test_ahead_names_the_front_of_the_queue_and_the_position_counts_all() -> None:
    pods = [busy()]
    for i in range(AHEAD_SHOWN + 3):
        pods += gang(f"g{i}", 8, T0 + 10 * i, selector=X)
    last = queue(pods)[f"g{AHEAD_SHOWN + 2}"]
    assert last == (AHEAD_SHOWN + 3, AHEAD_SHOWN + 3,
                    tuple(f"team/g{i}" for i in range(AHEAD_SHOWN)))


def test_status_json_gives_the_position_the_queue_length_and_the_gangs_ahead() -> None:
    reports = gang_status([busy(), *gang("first", 8, T0, selector=X),
                           *gang("second", 8, T0 + 10, selector=X)], pools(), Config(), NOW)
    records = {r["gang"]: r for r in json.loads(render_json(reports))}
    assert (records["second"]["queuePosition"], records["second"]["queueLength"],
            records["second"]["ahead"]) == (2, 2, ["team/first"])
    assert records["first"]["ahead"] == []


def test_explain_says_the_place_and_names_the_gangs_ahead_with_their_priority() -> None:
    pods = [busy(), *gang("first", 8, T0, selector=X),
            *gang("urgent", 8, T0 + 50, priority=100, selector=X),
            *gang("second", 8, T0 + 10, selector=X)]
    text = render(explain(pods, pools(), Config(), NOW, Target.parse("second-0", "team")), [])
    assert (
        "Queue:        3rd of 3 waiting for the nodes it may use; "
        "ahead: team/urgent (priority 100), team/first\n"
    ) in text
    first = render(explain(pods, pools(), Config(), NOW, Target.parse("urgent-0", "team")), [])
    assert "Queue:        1st of 3 waiting for the nodes it may use\n" in first


def test_explain_of_a_gang_waiting_for_members_says_it_is_in_no_queue() -> None:
    pods = gang("few", 4, T0)[:1]
    text = render(explain(pods, pools(), Config(), NOW, Target.parse("few-0", "team")), [])
    assert "Queue:        none: it does not wait for room\n" in text


@pytest.mark.parametrize(("n", "text"), [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"),
                                         (11, "11th"), (12, "12th"), (13, "13th"),
                                         (21, "21st"), (102, "102nd"), (111, "111th")])
def test_ordinals_read_as_english(n: int, text: str) -> None:
    assert ordinal(n) == text


def test_places_share_a_queue_only_where_node_sets_meet() -> None:
    a, ab, b, none = (frozenset(s) for s in ({"a"}, {"a", "b"}, {"b"}, set()))
    found = places([(1, "t/1", a), (2, "t/2", b), (3, "t/3", ab), (4, "t/4", none),
                    (5, "t/5", none), (6, "t/6", a)])
    assert {k: (p.position, p.length, p.ahead) for k, p in found.items()} == {
        1: (1, 3, ()), 2: (1, 2, ()), 3: (3, 4, ("t/1", "t/2")),
        # No eligible node at all: such gangs wait for the same (absent) room.
        4: (1, 2, ()), 5: (2, 2, ("t/4",)),
        6: (3, 3, ("t/1", "t/3")),
    }


# --- the gauge ----------------------------------------------------------------------


def report(name: str, position: int | None, namespace: str = "team") -> GangReport:
    return GangReport(
        namespace=namespace, name=name, label=name, backend="gate", min_member=1,
        present=1, gated=1, bound=0, state="waiting", code="no-fit" if position else
        "incomplete", reason="", age_seconds=0.0, arrived=T0, stuck=False,
        queue_position=position, queue_length=position or 0,
    )


def test_the_gauge_gives_each_queued_gang_its_position() -> None:
    samples = queue_samples([report("a", 1), report("b", 2), report("few", None)])
    assert samples == {
        ("gangkeeper_gang_queue_position", (("namespace", "team"), ("gang", "a"))): 1.0,
        ("gangkeeper_gang_queue_position", (("namespace", "team"), ("gang", "b"))): 2.0,
    }


def test_the_gauge_keeps_at_most_its_bound_of_series_nearest_the_front(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timings, "QUEUE_SERIES", 3)
    reports = [report(f"g{i}", i + 1) for i in range(5)] + [replace(report("h", 1),
                                                                    namespace="other")]
    kept = queue_samples(reports)
    assert sorted(kept.values()) == [1.0, 1.0, 2.0]
    assert ("gangkeeper_gang_queue_position", (("namespace", "other"), ("gang", "h"))) in kept
