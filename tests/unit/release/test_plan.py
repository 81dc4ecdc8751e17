"""The release decision: whole gangs only, in arrival order, never into used GPUs."""

from __future__ import annotations

from typing import Any

import pytest
from builders.gangs import T0, members, node, pod

from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.names import GATE
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import GangReport, Plan
from gangkeeper.policies.settings.config import Config, load_config

NOW = T0 + 60


def decide(
    pods: list[dict[str, Any]], nodes: list[dict[str, Any]], config: Config | None = None,
    now: float = NOW,
) -> Plan:
    cfg = config or Config()
    return plan([pod_info(p, cfg) for p in pods if is_live(p)], nodes, cfg, now)


def released(result: Plan) -> dict[str, set[str]]:
    """gang label → names of the pods the plan ungates."""
    return {r.gang.label: {p.name for p in r.pods} for r in result.releases}


def report(result: Plan, label: str) -> GangReport:
    return next(r for r in result.reports if r.label == label)


def eight_gpus() -> list[dict[str, Any]]:
    return [node("gpu-a", 4), node("gpu-b", 4)]


def test_a_gang_that_fits_the_free_gpus_is_released_whole() -> None:
    result = decide(members("llama", 8), eight_gpus())
    assert released(result) == {"llama": {f"llama-{i}" for i in range(8)}}
    assert report(result, "llama").state == "releasing"


def test_the_seed_story_eight_workers_five_free_gpus_none_released() -> None:
    busy = pod("busy", 3, gates=(), node_name="gpu-a")
    result = decide([busy, *members("llama", 8)], eight_gpus())
    assert result.releases == ()
    r = report(result, "llama")
    assert (r.state, r.code, r.gated, r.bound) == ("waiting", "no-fit", 8, 0)
    assert r.reason == "needs 8 nvidia.com/gpu, 5 free on eligible nodes"


@pytest.mark.parametrize(("present", "needed"), [(1, 8), (3, 8), (7, 8), (63, 64)])
def test_an_incomplete_gang_waits_and_says_how_many_members_exist(
    present: int, needed: int
) -> None:
    pods = members("job", needed)[:present]
    result = decide(pods, [node("big", 128)])
    assert result.releases == ()
    r = report(result, "job")
    assert (r.code, r.reason) == ("incomplete", f"{present} of {needed} members exist")
    assert (r.present, r.min_member) == (present, needed)


def test_min_member_below_the_gang_size_releases_once_enough_members_exist() -> None:
    late = pod("elastic-x", 1, gang="elastic", min_member=3, created=T0 + 9)
    pods = [*members("elastic", 3, min_member=3), late]
    result = decide(pods[:2], eight_gpus())
    assert result.releases == ()
    result = decide(pods, eight_gpus())
    assert released(result)["elastic"] == {"elastic-0", "elastic-1", "elastic-2", "elastic-x"}


def test_a_partly_released_gang_is_finished_even_when_it_no_longer_fits() -> None:
    pods = members("half", 8)
    for p in pods[:5]:  # a previous leader died after ungating five
        p["spec"].pop("schedulingGates")
    hog = pod("hog", 8, gates=(), node_name="gpu-a")  # nothing free any more
    result = decide([hog, *pods], [node("gpu-a", 8), node("gpu-b", 0)])
    assert released(result) == {"half": {f"half-{i}" for i in range(5, 8)}}
    assert "5 of 8 members already ungated" in report(result, "half").reason


def test_a_member_arriving_after_the_release_is_released_at_once() -> None:
    pods = members("done", 4)
    for p in pods[:3]:
        p["spec"].pop("schedulingGates")
        p["spec"]["nodeName"] = "gpu-a"
    result = decide(pods, eight_gpus())
    assert released(result) == {"done": {"done-3"}}


def test_a_fully_released_gang_needs_nothing() -> None:
    pods = members("ran", 2, gates=(), node_name="gpu-a")
    result = decide(pods, eight_gpus())
    assert result.releases == ()
    assert report(result, "ran").state == "released"
    assert report(result, "ran").bound == 2


def test_pods_pending_without_gates_count_as_using_gpus() -> None:
    # A 4-GPU pod the scheduler has not bound yet will take 4 of the 8 GPUs.
    pending = pod("pending", 4, gates=())
    result = decide([pending, *members("llama", 8)], eight_gpus())
    assert result.releases == ()
    assert report(result, "llama").reason == "needs 8 nvidia.com/gpu, 4 free on eligible nodes"


def test_two_gangs_are_never_released_into_the_same_free_gpus() -> None:
    first = members("first", 6, created=T0)
    second = members("second", 4, created=T0 + 100)
    result = decide(first + second, eight_gpus())
    assert set(released(result)) == {"first"}
    assert report(result, "second").reason == "needs 4 nvidia.com/gpu, 2 free on eligible nodes"


def test_gangs_are_taken_in_arrival_order_not_by_size() -> None:
    big_early = members("big", 6, created=T0)
    small_late = members("small", 2, created=T0 + 100)
    result = decide(small_late + big_early, eight_gpus())
    assert set(released(result)) == {"big", "small"}
    busy = pod("busy", 1, gates=(), node_name="gpu-a")
    result = decide([busy, *small_late, *big_early], eight_gpus())
    # 7 free: big (6) goes first; small (2) then does not fit.
    assert set(released(result)) == {"big"}


def test_a_later_gang_does_not_take_gpus_an_earlier_waiting_gang_may_use() -> None:
    busy = pod("busy", 3, gates=(), node_name="gpu-a")
    head = members("head", 8, created=T0)
    small = members("small", 2, created=T0 + 100)
    result = decide([busy, *head, *small], eight_gpus())
    assert result.releases == ()
    r = report(result, "small")
    assert r.code == "held"
    assert "held for team/head" in r.reason


def test_a_later_gang_may_backfill_nodes_the_waiting_gang_cannot_use() -> None:
    nodes = [
        node("a100-0", 4, labels={"pool": "a100"}),
        node("a100-1", 4, labels={"pool": "a100"}),
        node("l4-0", 4, labels={"pool": "l4"}),
    ]
    busy = pod("busy", 3, gates=(), node_name="a100-0")
    head = members("head", 8, created=T0, selector={"pool": "a100"})
    small = members("small", 2, created=T0 + 100, selector={"pool": "l4"})
    result = decide([busy, *head, *small], nodes)
    assert set(released(result)) == {"small"}
    assert report(result, "head").code == "no-fit"


def test_a_gang_that_can_never_fit_holds_no_nodes() -> None:
    never = members("never", 20, created=T0)  # 20 GPUs on an 8-GPU cluster
    small = members("small", 2, created=T0 + 100)
    result = decide([*never, *small], eight_gpus())
    assert set(released(result)) == {"small"}
    assert "cannot fit even on the empty cluster" in report(result, "never").reason


def test_the_gate_backend_judges_whole_members_not_only_totals() -> None:
    # 4 free GPUs, but 2+2 on two nodes: two 2-GPU members fit, one 4-GPU member does not.
    nodes = [node("n1", 4), node("n2", 4)]
    used = [pod("u1", 2, gates=(), node_name="n1"), pod("u2", 2, gates=(), node_name="n2")]
    result = decide([*used, *members("wide", 1, gpus=4), *members("narrow", 2, gpus=2,
                                                                   created=T0 + 50)], nodes)
    assert "wide" not in released(result)
    r = report(result, "wide")
    assert r.reason == (
        "needs 4 nvidia.com/gpu, 4 free on eligible nodes, but no node has room for a whole member"
    )


@pytest.mark.parametrize(
    ("node_kwargs", "pod_kwargs", "fits"),
    [
        ({"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]}, {}, False),
        (
            {"taints": [{"key": "gpu", "value": "x", "effect": "NoSchedule"}]},
            {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
            True,
        ),
        ({"unschedulable": True}, {}, False),
        ({"labels": {"zone": "b"}}, {"selector": {"zone": "a"}}, False),
        ({"labels": {"zone": "a"}}, {"selector": {"zone": "a"}}, True),
    ],
)
def test_only_nodes_the_members_may_use_count_as_free(
    node_kwargs: dict[str, Any], pod_kwargs: dict[str, Any], fits: bool
) -> None:
    result = decide(members("g", 2, **pod_kwargs), [node("only", 8, **node_kwargs)])
    assert bool(result.releases) is fits
    if not fits:
        assert report(result, "g").reason.startswith("needs 2 nvidia.com/gpu, 0 free")


def test_a_cluster_without_gpu_nodes_releases_no_gpu_gang() -> None:
    result = decide(members("g", 2), [])
    assert result.releases == ()
    assert report(result, "g").reason == "needs 2 nvidia.com/gpu, 0 free on eligible nodes"


def test_a_gang_without_gpu_demand_waits_for_a_node_to_place_it_on() -> None:
    # No node at all: released members could only sit Pending (as a GPU gang's would).
    assert released(decide(members("cpu", 3, gpus=0), [])) == {}
    result = decide(members("cpu", 3, gpus=0), [node("a", 0)])
    assert released(result) == {"cpu": {"cpu-0", "cpu-1", "cpu-2"}}


@pytest.mark.parametrize("backend", ["coscheduling", "volcano", "native"])
def test_scheduler_backends_release_complete_gangs_with_a_group_object(backend: str) -> None:
    busy = pod("busy", 8, gates=(), node_name="gpu-a")  # capacity is the scheduler's job
    result = decide([busy, *members("g", 4, backend=backend)], [node("gpu-a", 8)])
    assert released(result) == {"g": {"g-0", "g-1", "g-2", "g-3"}}
    assert result.releases[0].needs_group is True


def test_scheduler_backends_still_wait_for_min_member() -> None:
    result = decide(members("g", 4, backend="volcano")[:3], [node("gpu-a", 8)])
    assert result.releases == ()
    assert report(result, "g").reason == "3 of 4 members exist"


def test_the_namespace_backend_from_config_applies_when_pods_do_not_say() -> None:
    config = load_config({"namespaceBackends": {"team": "coscheduling"}})
    result = decide(members("g", 2), [], config=config)
    assert result.releases[0].needs_group is True


@pytest.mark.parametrize("bad", ["", "zero", "0", "-3", "2.5"])
def test_an_unreadable_min_member_waits_and_says_so(bad: str) -> None:
    result = decide(members("g", 2, min_member=bad), eight_gpus())  # type: ignore[arg-type]
    assert result.releases == ()
    r = report(result, "g")
    assert r.code == "invalid"
    assert "gangkeeper.io/min-member" in r.reason


def test_members_that_disagree_on_min_member_wait_for_the_larger() -> None:
    pods = members("g", 3, min_member=3)
    pods[0]["metadata"]["annotations"]["gangkeeper.io/min-member"] = "4"
    result = decide(pods, eight_gpus())
    assert report(result, "g").reason == "3 of 4 members exist"


def test_finished_and_deleting_pods_are_not_members() -> None:
    pods = members("g", 3)
    pods[0]["status"]["phase"] = "Failed"
    pods[1]["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    result = decide(pods, eight_gpus())
    assert report(result, "g").present == 1


def test_gpus_of_a_pod_being_deleted_stay_used_until_it_is_gone() -> None:
    # No kubelet has confirmed the deletion: the node still holds the GPUs, and the
    # scheduler still counts them.
    leaving = pod("leaving", 4, gates=(), node_name="gpu-a", deleting=True)
    result = decide([leaving, *members("g", 8)], eight_gpus())
    assert result.releases == ()
    assert report(result, "g").reason == "needs 8 nvidia.com/gpu, 4 free on eligible nodes"


def test_other_systems_gates_keep_a_member_counted_as_gated_by_us_only_with_ours() -> None:
    pods = members("g", 2, gates=(GATE, "example.com/quota"))
    result = decide(pods, eight_gpus())
    assert released(result) == {"g": {"g-0", "g-1"}}
    assert all(p.gates == (GATE, "example.com/quota") for p in result.releases[0].pods)


@pytest.mark.parametrize(("age", "stuck"), [(299, False), (300, True), (3600, True)])
def test_a_gang_waiting_longer_than_the_timeout_is_stuck(age: int, stuck: bool) -> None:
    pods = members("g", 8)[:3]
    result = decide(pods, eight_gpus(), now=T0 + age)
    assert report(result, "g").stuck is stuck


def test_a_released_gang_is_never_stuck() -> None:
    pods = members("g", 2, gates=(), node_name="gpu-a")
    assert report(decide(pods, eight_gpus(), now=T0 + 10_000), "g").stuck is False


def test_gangs_of_the_same_name_in_two_namespaces_are_separate() -> None:
    pods = members("g", 2, namespace="a") + members("g", 2, namespace="b")[:1]
    result = decide(pods, eight_gpus())
    assert [(r.gang.namespace, len(r.pods)) for r in result.releases] == [("a", 2)]


# --- members that arrive after release (issue 11) --------------------------------------

LATER = "gangkeeper.io/later-members"


def with_later(pods: list[dict[str, Any]], count: int, gpus: int) -> list[dict[str, Any]]:
    """Members whose gang has `count` more of `gpus` GPUs that arrive after release (a
    JobSet exclusive-placement gang's followers, an LWS LeaderReady group's workers)."""
    for p in pods:
        p["metadata"]["annotations"][LATER] = (
            f'[{{"count":{count},"demand":{{"nvidia.com/gpu":{gpus}}}}}]'
        )
    return pods


def test_the_members_that_can_exist_are_released_when_the_whole_gang_fits() -> None:
    """2 leaders present, 6 followers to come (minMember 8, 8 GPUs each), 8 free nodes:
    the leaders go now, without waiting for followers that only exist after them."""
    leaders = with_later(members("js", 2, min_member=8, gpus=8), 6, 8)
    result = decide(leaders, [node(f"n{i}", 8) for i in range(8)])
    assert released(result) == {"js": {"js-0", "js-1"}}
    r = report(result, "js")
    assert r.state == "releasing"
    assert "room held for 6 that arrive after release" in r.reason


def test_nothing_is_released_unless_the_later_members_fit_too() -> None:
    leaders = with_later(members("js", 2, min_member=8, gpus=8), 6, 8)
    result = decide(leaders, [node(f"n{i}", 8) for i in range(7)])
    assert result.releases == ()
    assert report(result, "js").code == "no-fit"


def test_the_room_of_later_members_is_held_against_other_gangs() -> None:
    """Once the leaders are released, the 6 followers' GPUs count as used: a gang that
    arrives next does not take them."""
    leaders = with_later(members("js", 2, min_member=8, gpus=8), 6, 8)
    for p in leaders:
        p["spec"].pop("schedulingGates")
    leaders[0]["spec"]["nodeName"], leaders[1]["spec"]["nodeName"] = "n0", "n1"
    other = members("other", 1, min_member=1, gpus=8, created=T0 + 30)
    result = decide([*leaders, *other], [node(f"n{i}", 8) for i in range(8)])
    assert "other" not in released(result)
    assert report(result, "other").code == "no-fit"
    assert report(result, "js").reason == (
        "all gates lifted; room held for 6 members that arrive after release"
    )


def test_a_later_member_of_a_released_gang_is_released_at_once() -> None:
    leaders = with_later(members("js", 2, min_member=8, gpus=8), 6, 8)
    for i, p in enumerate(leaders):
        p["spec"].pop("schedulingGates")
        p["spec"]["nodeName"] = f"n{i}"
    follower = with_later([pod("js-f0", 8, gang="js", min_member=8, created=T0 + 10)], 6, 8)
    result = decide([*leaders, *follower], [node(f"n{i}", 8) for i in range(8)])
    assert released(result) == {"js": {"js-f0"}}


def test_a_gang_waits_for_its_first_members_only() -> None:
    leaders = with_later(members("js", 2, min_member=8, gpus=8), 6, 8)[:1]
    r = report(decide(leaders, [node(f"n{i}", 8) for i in range(8)]), "js")
    assert (r.code, r.reason) == (
        "incomplete",
        "1 of 2 members exist (6 more arrive after release)",
    )


# --- members beyond minMember (elastic jobs) ------------------------------------------


def test_members_beyond_min_member_are_released_as_they_fit() -> None:
    """An elastic PyTorchJob: 4 workers of 4 GPUs, minReplicas 2, 8 free GPUs: the two
    that fit go now, the others wait for room instead of holding everyone back."""
    workers = members("elastic", 4, min_member=2, gpus=4)
    result = decide(workers, [node("a", 4), node("b", 4)])
    assert len(released(result)["elastic"]) == 2
    assert report(result, "elastic").state == "releasing"
    running = [dict(w) for w in workers]
    for w, name in zip(running[:2], ("a", "b"), strict=True):
        w["spec"] = {**w["spec"], "nodeName": name}
        w["spec"].pop("schedulingGates")
    later = decide(running, [node("a", 4), node("b", 4), node("c", 4)])
    assert len(released(later)["elastic"]) == 1


def test_fewer_than_min_member_fitting_releases_none() -> None:
    workers = members("elastic", 4, min_member=3, gpus=4)
    result = decide(workers, [node("a", 4), node("b", 4)])
    assert result.releases == ()
