"""`gangkeeper ungate`'s decision: the gangs the controller would release now, pass
after pass, and the ones left gated with why (what only --force would release)."""

from __future__ import annotations

from builders.gangs import T0, members, node, pod

from gangkeeper.policies.release.ungate import ungate_plan
from gangkeeper.policies.settings.config import Config

CFG = Config()


def names(plan) -> tuple[list[str], list[str]]:  # type: ignore[no-untyped-def]
    return [r.gang.name for r in plan.releases], [r.name for r in plan.waiting]


def test_gangs_that_fit_now_are_released_and_the_others_left_with_their_reason() -> None:
    nodes = [node("n1", 8), node("n2", 8)]
    pods = [
        *members("fits", 4, gpus=2),                       # 8 of 16 GPUs
        *members("too-big", 3, gpus=4, created=T0 + 10),   # 12 more: does not fit now
        *members("incomplete", 2, min_member=4, created=T0 + 20),
    ]
    decided = ungate_plan(pods, nodes, CFG, T0 + 60)
    assert names(decided) == (["fits"], ["too-big", "incomplete"])
    assert [p.name for p in decided.releases[0].pods] == [f"fits-{i}" for i in range(4)]
    waiting = {r.name: r for r in decided.waiting}
    assert "nvidia.com/gpu" in waiting["too-big"].reason
    assert waiting["incomplete"].reason == "2 of 4 members exist"
    assert [p.name for p in decided.waiting_pods[("team", "too-big")]] == [
        "too-big-0", "too-big-1", "too-big-2"
    ]


def test_a_gang_released_in_one_pass_takes_its_gpus_before_the_next_is_judged() -> None:
    nodes = [node("n1", 8)]
    pods = [*members("a", 2, gpus=4), *members("b", 2, gpus=4, created=T0 + 10)]
    decided = ungate_plan(pods, nodes, CFG, T0 + 60)
    assert names(decided) == (["a"], ["b"]), "b's 8 GPUs are a's now"


def test_a_release_cut_short_is_finished_whatever_the_capacity() -> None:
    pods = members("half", 4, gpus=2)
    for p in pods[:2]:
        p["spec"]["schedulingGates"] = []
        p["spec"]["nodeName"] = "n1"
    decided = ungate_plan(pods, [node("n1", 4)], CFG, T0 + 60)
    assert names(decided) == (["half"], [])
    assert [p.name for p in decided.releases[0].pods] == ["half-2", "half-3"]


def test_only_the_namespace_asked_for_is_released_and_nothing_else_is_reported() -> None:
    nodes = [node("n1", 8)]
    pods = [*members("mine", 2), *[pod(f"theirs-{i}", namespace="other", gang="theirs",
                                       min_member=2) for i in range(2)]]
    decided = ungate_plan(pods, nodes, CFG, T0 + 60, namespace="other")
    assert names(decided) == (["theirs"], [])


def test_nothing_gated_means_nothing_to_do() -> None:
    pods = [pod("solo", 2, node_name="n1", phase="Running")]
    decided = ungate_plan(pods, [node("n1", 8)], CFG, T0)
    assert names(decided) == ([], [])


def test_a_mixed_gang_is_released_pinned_as_the_controller_pins_it() -> None:
    """8 + 4 + 4 GPUs on two 8-GPU nodes: unpinned, the stock scheduler spreads the two
    4-GPU members and the 8 never binds (issue 12). Before, `ungate` lifted the gates
    unpinned, so a gang released with the controller scaled to zero could end partly
    bound; now each member carries the controller's pin."""
    nodes = [node("n1", 8), node("n2", 8)]
    pods = [*members("mix", 1, gpus=8, min_member=3),
            *[pod(f"mix-small-{i}", gpus=4, gang="mix", min_member=3) for i in range(2)]]
    decided = ungate_plan(pods, nodes, CFG, T0 + 60)
    (release,) = decided.releases
    by_name = {p.name: release.pins.get(p.uid) for p in release.pods}
    assert set(by_name) == {"mix-0", "mix-small-0", "mix-small-1"}
    assert by_name["mix-small-0"] == by_name["mix-small-1"] != by_name["mix-0"]
    assert {by_name["mix-0"], by_name["mix-small-0"]} == {"n1", "n2"}


def test_the_next_pass_sees_the_pinned_members_on_their_nodes() -> None:
    """A gang released pinned takes the room it is pinned to: the next gang in line is
    judged against it there, not wherever first-fit would have put it."""
    nodes = [node("n1", 8), node("n2", 8)]
    pods = [*members("first", 2, gpus=4),
            *members("second", 1, gpus=8, created=T0 + 10),
            *members("third", 1, gpus=8, created=T0 + 20)]
    decided = ungate_plan(pods, nodes, CFG, T0 + 60)
    assert names(decided) == (["first", "second"], ["third"])
    first, second = decided.releases
    taken = set(first.pins.values())
    assert len(taken) == 1, "both 4-GPU members pinned to one node"
    assert set(second.pins.values()).isdisjoint(taken)
