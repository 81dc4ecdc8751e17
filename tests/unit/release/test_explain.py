"""`gangkeeper explain` computed from plain dicts: the gang found from a pod or its
workload, what it asks for and is compared with, the older gangs holding its nodes."""

from __future__ import annotations

import json

import pytest
from builders.gangs import T0, members, node, pod

from gangkeeper.policies.release.explain import NotAGang, Target, explain, render
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
OWNER = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train", "uid": "u1"}


def test_a_pod_and_its_workload_name_the_same_gang() -> None:
    pods = members("train", 4, gpus=8, owner=OWNER)[:3]
    nodes = [node("n1", 8), node("n2", 8)]
    by_pod = explain(pods, nodes, CONFIG, T0 + 60, Target.parse("train-1", "team"))
    by_owner = explain(pods, nodes, CONFIG, T0 + 60, Target.parse("jobsets/train", "team"))
    assert by_pod == by_owner
    assert by_pod.owner == "JobSet/train"
    assert (by_pod.report.present, by_pod.report.min_member, by_pod.report.code) == (
        3,
        4,
        "incomplete",
    )
    assert by_pod.demand == {"nvidia.com/gpu": 24}


def test_an_older_gang_that_does_not_fit_holds_the_nodes_a_younger_one_may_use() -> None:
    busy = pod("other", 6, node_name="n1")  # not a gang member: it just uses 6 GPUs
    older = members("big", 2, gpus=8, created=T0)  # needs 16, 10 free: waits, holds n1+n2
    younger = members("small", 1, gpus=2, created=T0 + 10)  # would fit, but n1/n2 are held
    nodes = [node("n1", 8), node("n2", 8)]
    target = Target.parse("small-0", "team")
    expl = explain([busy, *older, *younger], nodes, CONFIG, T0 + 60, target)
    assert expl.report.code == "held"
    assert expl.held_by == (("team/big", ("n1", "n2")),)
    assert dict(expl.free) == {"n1": {"nvidia.com/gpu": 2}, "n2": {"nvidia.com/gpu": 8}}
    text = render(expl, [])
    assert "Held for older gangs:\n  team/big: n1, n2" in text
    assert "Compared with: nvidia.com/gpu: 10 free on the 2 nodes its members may use" in text
    assert "Events: <none>" in text


def test_render_lists_members_and_events_like_kubectl_describe() -> None:
    pods = members("train", 2, gpus=1)[:1]
    expl = explain(pods, [node("n1", 8)], CONFIG, T0 + 30, Target.parse("pod/train-0", "team"))
    event = {
        "type": "Warning",
        "reason": "GangIncomplete",
        "eventTime": "2027-01-15T08:00:30.000000Z",
        "reportingController": "gangkeeper.io/controller",
        "note": "1 of 2 members exist",
        "regarding": {"kind": "Pod", "name": "train-0"},
    }
    text = render(expl, [event])
    assert "Members:      1 present / 2 needed (1 gated, 0 bound)" in text
    assert "State:        waiting (incomplete)" in text
    assert "train-0  yes    <none>" in text
    assert "GangIncomplete" in text and "1 of 2 members exist" in text
    assert "Pod/train-0" in text
    json.dumps(expl.members)  # plain data


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("lonely", "pod team/lonely is not a live member of a gang"),
        ("jobset/nothing", "no live gang pods owned by jobset/nothing in team"),
        ("jobset/", "give POD, pod/NAME or KIND/NAME"),
    ],
)
def test_a_target_that_is_no_gang_says_so(target: str, message: str) -> None:
    pods = [pod("lonely", 1), *members("train", 2)]
    with pytest.raises(NotAGang, match=message):
        explain(pods, [node("n1", 8)], CONFIG, T0, Target.parse(target, "team"))


def test_an_older_gang_that_can_never_fit_holds_nothing() -> None:
    impossible = members("huge", 2, gpus=16, created=T0)  # 16 GPUs per pod, nodes have 8
    younger = members("small", 1, gpus=2, created=T0 + 10)
    target = Target.parse("small-0", "team")
    expl = explain([*impossible, *younger], [node("n1", 8)], CONFIG, T0 + 60, target)
    assert expl.held_by == ()
    assert expl.report.state == "releasing"
