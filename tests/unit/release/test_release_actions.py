"""What is said and counted once a release's patches were answered
(`release.release_actions.after_release`): a replacement member released into a
running gang gets one Normal Event only if its patch succeeded; a gang released
unpinned is told why. Plain dicts in."""

from __future__ import annotations

from dataclasses import replace

from builders.gangs import T0, members, node

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.release_actions import after_release
from gangkeeper.policies.release.results import Release
from gangkeeper.policies.settings.config import Config

CFG = Config()


def release_of(pods: list[dict[str, object]]) -> Release:
    [release] = plan([pod_info(p, CFG) for p in pods], [node("n1", 8)], CFG, T0 + 60).releases
    return release


def test_a_member_rejoining_a_released_gang_gets_a_normal_event_once_lifted() -> None:
    pods = members("train", 2, gpus=2)
    pods[0]["spec"]["schedulingGates"] = []
    pods[0]["spec"]["nodeName"] = "n1"
    release = release_of(pods)
    [member] = release.pods
    events, counts = after_release(release, {member.uid})
    [event] = events
    assert (event.reason, [t["name"] for t in event.regarding]) == (
        cat.GANG_MEMBER_REJOINED, ["train-1"])
    assert "1 of its members were released already" in event.note
    assert (cat.GANG_REJOINED_PODS, (), 1.0) in counts
    # Its patch failed: no Event now (the pass that retries it says it then).
    assert after_release(release, set())[0] == []


def test_a_first_release_is_counted_with_its_pins_and_says_nothing() -> None:
    release = release_of(members("train", 2, gpus=2))
    events, counts = after_release(release, {p.uid for p in release.pods})
    assert events == []
    assert counts == [(cat.GANG_RELEASES, (("backend", "gate"),), 1.0),
                      (cat.GANG_PINNED_PODS, (), 2.0)]


def test_a_gang_released_unpinned_is_told_why() -> None:
    release = replace(release_of(members("train", 2, gpus=2)), pins={},
                      unpinned="required pod anti-affinity")
    [event], counts = after_release(release, {p.uid for p in release.pods})
    assert event.reason == cat.GANG_RELEASED_UNPINNED
    assert event.note.endswith("(the scheduler places them): required pod anti-affinity")
    assert (cat.GANG_UNPINNED_RELEASES, (), 1.0) in counts
