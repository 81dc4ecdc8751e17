"""Gangs on autoscaled pools: who asks for nodes, with which placeholders, until when."""

from __future__ import annotations

from typing import Any

import pytest
from builders.gangs import T0, members, node, pod

from gangkeeper.policies.autoscaling.placeholders import placeholder_pod
from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import GangReport, Plan
from gangkeeper.policies.settings.config import Config, load_config

NOW = T0 + 60
POOL = {"gangkeeper-pool": "a"}
#: A declared pool of eight 8-GPU nodes, scaled to zero (Karpenter's NodePool limit 64).
POOLED = {
    "pools": [{"name": "a", "maxCount": 8, "labels": POOL, "allocatable": {"nvidia.com/gpu": 8}}],
    "provisioningTimeoutSeconds": 600,
}


def decide(
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    config: Config,
    now: float = NOW,
    backoff: dict[tuple[str, str, float], tuple[int, float]] | None = None,
) -> Plan:
    return plan([pod_info(p, config) for p in pods if is_live(p)], nodes, config, now, backoff)


def report(result: Plan, label: str) -> GangReport:
    return next(r for r in result.reports if r.label == label)


def gang(label: str, count: int = 4, created: float = T0) -> list[dict[str, Any]]:
    return members(label, count, gpus=8, selector=POOL, created=created)


def placeholders_of(
    gang_pods: list[dict[str, Any]],
    config: Config,
    *,
    nodes: list[str] | None = None,
    created: float = T0 + 10,
) -> list[dict[str, Any]]:
    """The placeholders the controller would have created (bound to `nodes`, if given)."""
    out = []
    for index, member in enumerate(gang_pods):
        body = placeholder_pod(member, member["metadata"]["labels"]["gangkeeper.io/gang"],
                               config.autoscaling, None)
        body["metadata"]["uid"] = f"uid-ph-{index}-{body['metadata']['name']}"
        body["metadata"]["creationTimestamp"] = pod("x", created=created)["metadata"][
            "creationTimestamp"
        ]
        if nodes is not None and index < len(nodes):
            body["spec"]["nodeName"] = nodes[index]
        body["status"] = {"phase": "Pending"}
        out.append(body)
    return out


def pool_nodes(count: int, prefix: str = "karp") -> list[dict[str, Any]]:
    return [node(f"{prefix}-{i}", 8, labels=POOL) for i in range(count)]


def test_a_gang_that_fits_the_declared_pool_but_no_node_gets_a_placeholder_per_member() -> None:
    config = load_config(POOLED)
    result = decide(gang("llama"), [], config)
    [ask] = result.asks
    assert sorted(m.name for m in ask.create) == [f"llama-{i}" for i in range(4)]
    assert ask.delete == ()
    r = report(result, "llama")
    assert (r.state, r.code) == ("waiting", "provisioning")
    assert "asked the autoscaler for room: 0 of 4 placeholders bound" in r.reason
    assert result.releases == ()


def test_without_a_declared_pool_the_gang_waits_gated_as_before() -> None:
    result = decide(gang("llama"), [node("small", 8, labels=POOL)], load_config({}))
    assert result.asks == ()
    assert report(result, "llama").code == "no-fit"


def test_cluster_autoscales_asks_without_a_declared_pool() -> None:
    config = load_config({"clusterAutoscales": True})
    result = decide(gang("llama"), [node("small", 8, labels=POOL)], config)
    [ask] = result.asks
    # The member that fits the 8 free GPUs needs no placeholder; the other three do.
    assert len(ask.create) == 3


@pytest.mark.parametrize(
    "overrides",
    [{"autoscaling": "off"}, {"namespaceAutoscaling": {"team": "off"}}],
)
def test_autoscaling_off_never_asks(overrides: dict[str, Any]) -> None:
    result = decide(gang("llama"), [], load_config({**POOLED, **overrides}))
    assert result.asks == ()
    assert report(result, "llama").code == "no-fit"


def test_a_gang_beyond_the_pool_maximum_does_not_ask() -> None:
    result = decide(gang("huge", 9), [], load_config(POOLED))
    assert result.asks == ()
    assert "cannot fit even on the empty cluster" in report(result, "huge").reason


def test_bound_placeholders_release_the_gang_onto_their_room_and_are_deleted_with_it() -> None:
    config = load_config(POOLED)
    pods = gang("llama")
    nodes = pool_nodes(4)
    holders = placeholders_of(pods, config, nodes=[n["metadata"]["name"] for n in nodes])
    result = decide([*pods, *holders], nodes, config)
    [release] = result.releases
    assert {p.name for p in release.pods} == {f"llama-{i}" for i in range(4)}
    assert {p.name for p in release.placeholders} == {f"llama-{i}-gkp" for i in range(4)}
    assert result.asks == () and result.orphans == ()


def test_partly_bound_placeholders_keep_the_gang_waiting_and_nothing_is_recreated() -> None:
    config = load_config(POOLED)
    pods = gang("llama")
    nodes = pool_nodes(2)
    holders = placeholders_of(pods, config, nodes=["karp-0", "karp-1"])
    result = decide([*pods, *holders], nodes, config)
    assert result.releases == ()
    [ask] = result.asks
    assert (ask.create, ask.delete, ask.wanted, ask.bound) == ((), (), 4, 2)
    assert "2 of 4 placeholders bound" in report(result, "llama").reason


def test_placeholders_are_room_no_later_gang_may_take() -> None:
    config = load_config(POOLED)
    pods = gang("llama")
    nodes = pool_nodes(2)
    holders = placeholders_of(pods, config, nodes=["karp-0", "karp-1"])
    small = members("small", 1, gpus=8, selector=POOL, created=T0 + 30)
    result = decide([*pods, *holders, *small], nodes, config)
    assert [r.gang.label for r in result.releases] == []


def test_two_gangs_for_one_pool_ask_one_at_a_time_oldest_first() -> None:
    config = load_config(POOLED)
    first, second = gang("first", 6), gang("second", 6, created=T0 + 20)
    result = decide([*first, *second], [], config)
    assert [a.gang.label for a in result.asks] == ["first"]
    r = report(result, "second")
    assert r.code == "held"
    assert "team/first, which came first, is asking the autoscaler" in r.reason


def test_when_the_first_gang_runs_the_second_asks() -> None:
    config = load_config(POOLED)
    nodes = pool_nodes(6)
    first = gang("first", 6)
    for member, n in zip(first, nodes, strict=True):
        member["spec"].pop("schedulingGates")
        member["spec"]["nodeName"] = n["metadata"]["name"]
    second = gang("second", 6, created=T0 + 20)
    result = decide([*first, *second], nodes, config)
    [ask] = result.asks
    assert ask.gang.label == "second" and len(ask.create) == 6


def test_an_ask_times_out_removes_every_placeholder_and_says_how_many_nodes_came() -> None:
    config = load_config(POOLED)
    pods = gang("llama")
    nodes = pool_nodes(2)
    holders = placeholders_of(pods, config, nodes=["karp-0", "karp-1"], created=T0)
    result = decide([*pods, *holders], nodes, config, now=T0 + 600)
    [ask] = result.asks
    assert ask.create == () and len(ask.delete) == 4
    assert ask.timed_out.startswith("2 of 4 members' nodes came in 600 s")
    assert "asking again in 60 s" in ask.timed_out


def test_during_backoff_the_gang_asks_for_nothing_and_then_asks_again() -> None:
    config = load_config(POOLED)
    pods = gang("llama")
    key = ("team", "llama", T0)
    waiting = decide(pods, [], config, now=T0 + 700, backoff={key: (1, T0 + 760)})
    assert [a.create for a in waiting.asks] == []
    assert "asking again in 60s" in report(waiting, "llama").reason
    again = decide(pods, [], config, now=T0 + 761, backoff={key: (1, T0 + 760)})
    assert len(again.asks[0].create) == 4


def test_placeholders_of_a_gang_that_is_gone_are_orphans() -> None:
    config = load_config(POOLED)
    holders = placeholders_of(gang("gone"), config)
    result = decide(holders, [], config)
    assert {p.name for p in result.orphans} == {f"gone-{i}-gkp" for i in range(4)}


def test_a_member_that_has_room_now_gets_no_placeholder_and_a_pending_one_holds_room() -> None:
    config = load_config(POOLED)
    pods = gang("llama")
    free = [node("other", 8, labels=POOL)]
    [ask] = decide(pods, free, config).asks
    assert len(ask.create) == 3  # one member fits the free node now
    # Once the four exist, the pass places the pending ones first-fit like any pod in
    # flight: one takes the free node (the scheduler will bind it there), so the
    # gang keeps all four and none is recreated or deleted.
    holders = placeholders_of(pods, config)
    [ask] = decide([*pods, *holders], free, config).asks
    assert (ask.create, ask.delete, ask.wanted) == ((), (), 4)


def test_the_metrics_count_gangs_waiting_for_nodes() -> None:
    from kubernetes.client import ApiClient

    from gangkeeper.webhook.controller.controller import GangController

    config = load_config(POOLED)
    controller = GangController(ApiClient(), config, namespace="gangkeeper-system", identity="t")
    controller._last_plan = decide(gang("llama"), [], config)
    samples = controller.metric_samples()
    assert samples[("gangkeeper_gangs_waiting", (("reason", "provisioning"),))] == 1.0
    assert samples[("gangkeeper_gangs_waiting", (("reason", "no-fit"),))] == 0.0
