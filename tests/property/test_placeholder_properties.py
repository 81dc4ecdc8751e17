"""Rules of placeholder capacity that must hold for every cluster state."""

from __future__ import annotations

from typing import Any

from builders.gangs import T0, members, node
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.autoscaling.placeholders import placeholder_name, placeholder_pod
from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import load_config

POOLS = ("a", "b")
CONFIG = load_config({
    "pools": [{"name": p, "maxCount": 4, "labels": {"pool": p},
               "allocatable": {"nvidia.com/gpu": 8}} for p in POOLS],
    "provisioningTimeoutSeconds": 100,
})

gang_st = st.tuples(st.sampled_from(POOLS), st.integers(1, 5), st.sampled_from([4, 8]))
state_st = st.fixed_dictionaries({
    "gangs": st.lists(gang_st, max_size=4),
    "nodes": st.lists(st.sampled_from(POOLS), max_size=4),
    # (gang index, bound?, age) per placeholder; indexes past the gangs are orphans.
    "holders": st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.integers(0, 200)),
                        max_size=8),
    "now": st.integers(0, 300),
})


def build(state: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pods: list[dict[str, Any]] = []
    gangs: list[list[dict[str, Any]]] = []
    for index, (pool, count, gpus) in enumerate(state["gangs"]):
        gang = members(f"g{index}", count, gpus=gpus, selector={"pool": pool},
                       created=T0 + 10 * index)
        gangs.append(gang)
        pods += gang
    nodes = [node(f"n{i}", 8, labels={"pool": p}) for i, p in enumerate(state["nodes"])]
    seen: set[str] = set()
    for index, bound, age in state["holders"]:
        source = (gangs[index] if index < len(gangs) else members(f"gone{index}", 1, gpus=8,
                                                                   selector={"pool": "a"}))
        member = source[0]
        body = placeholder_pod(member, member["metadata"]["labels"]["gangkeeper.io/gang"],
                               CONFIG.autoscaling, None)
        name = body["metadata"]["name"]
        if name in seen:
            continue
        seen.add(name)
        body["metadata"]["uid"] = f"uid-{name}"
        body["metadata"]["creationTimestamp"] = _stamp(T0 + state["now"] - age)
        if bound and nodes:
            body["spec"]["nodeName"] = nodes[0]["metadata"]["name"]
        body["status"] = {"phase": "Pending"}
        pods.append(body)
    return pods, nodes


def _stamp(seconds: float) -> str:
    from builders.gangs import stamp

    return stamp(max(seconds, 0))


@settings(max_examples=200, deadline=None)
@given(state_st)
def test_every_placeholder_is_kept_deleted_or_released_exactly_once(state: dict[str, Any]) -> None:
    pods, nodes = build(state)
    infos = [pod_info(p, CONFIG) for p in pods if is_live(p)]
    result = plan(infos, nodes, CONFIG, T0 + state["now"])
    holders = {p.name for p in infos if p.placeholder_for}
    deleted = [p.name for a in result.asks for p in a.delete]
    released = [p.name for r in result.releases for p in r.placeholders]
    orphans = [p.name for p in result.orphans]
    gone = deleted + released + orphans
    assert len(gone) == len(set(gone)), "a placeholder is deleted twice"
    kept = holders - set(gone)
    # What stays belongs to a gang that asks this pass, and is one it wants.
    asking = {a.gang.label for a in result.asks if not a.timed_out}
    for name in kept:
        owner = next(p.placeholder_for for p in infos if p.name == name)
        assert owner in asking, f"{name} outlives its gang's ask"
    # Nothing is created twice, and never for a gang that is released this pass.
    released_gangs = {r.gang.label for r in result.releases}
    for ask in result.asks:
        assert ask.gang.label not in released_gangs
        for member in ask.create:
            assert placeholder_name(member.name) not in holders


@settings(max_examples=200, deadline=None)
@given(state_st)
def test_at_most_one_gang_asks_for_each_pool(state: dict[str, Any]) -> None:
    pods, nodes = build(state)
    infos = [pod_info(p, CONFIG) for p in pods if is_live(p)]
    result = plan(infos, nodes, CONFIG, T0 + state["now"])
    pools = [state["gangs"][int(a.gang.label[1:])][0] for a in result.asks]
    assert len(pools) == len(set(pools))
