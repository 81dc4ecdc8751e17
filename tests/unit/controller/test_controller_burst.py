"""Releases sent as they are decided (`controller.burst`, `plan`'s `on_release`): a
gang's gates do not wait for the rest of the pass, nothing is sent twice, and nothing
is sent early that needs a write first or when leadership cannot be confirmed."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import replace

import pytest
from builders.gangs import T0, members, node

from gangkeeper.policies.cluster.observed_gangs import PodInfo, pod_info
from gangkeeper.policies.release import plan as plan_module
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan, Release
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller.burst import Burst

CFG = Config()


def _two_gangs(on_release: object = None) -> Plan:
    pods = [*members("a", 2, gpus=4), *members("b", 2, gpus=4, created=T0 + 10)]
    return plan([pod_info(p, CFG) for p in pods], [node("n1", 8), node("n2", 8)], CFG,
                T0 + 60, on_release=on_release)  # type: ignore[arg-type]


def test_each_release_is_told_before_the_next_gang_is_decided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order: list[str] = []
    decide = plan_module.decide_gang

    def logged(gang, run):  # type: ignore[no-untyped-def]
        order.append(f"decide {gang.name}")
        return decide(gang, run)

    monkeypatch.setattr(plan_module, "decide_gang", logged)
    told: list[Release] = []
    result = _two_gangs(lambda r: (told.append(r), order.append(f"release {r.gang.name}")))
    assert order == ["decide a", "release a", "decide b", "release b"]
    assert tuple(told) == result.releases  # the same releases, nothing taken back


class _Patches:
    """The ungate callable: records each pod patched (and can be made to block)."""

    def __init__(self) -> None:
        self.patched: list[str] = []

    def __call__(self, pod: PodInfo, host: str | None, notes: Mapping[str, str] | None) -> str:
        self.patched.append(pod.name)
        return "ungated"


def _burst(
    patches: _Patches, *, leader: bool = True, early: bool = True
) -> tuple[Burst, list[str]]:
    calls: list[str] = []

    def confirm() -> bool:
        calls.append("confirm")
        return leader

    burst = Burst(ThreadPoolExecutor(4), patches, confirm=confirm,
                  before_first=lambda: calls.append("before-first"), early=early)
    return burst, calls


def test_a_release_needing_nothing_first_is_patched_at_once_and_only_once() -> None:
    patches = _Patches()
    burst, calls = _burst(patches)
    result = _two_gangs(burst.decided)
    first, second = result.releases
    assert burst.was_sent(first) and burst.was_sent(second) and burst.early_count == 2
    futures = {**burst.submit(first), **burst.submit(second)}  # the same futures again
    wait(futures.values())
    assert sorted(patches.patched) == ["a-0", "a-1", "b-0", "b-1"]
    assert calls == ["confirm", "before-first"]  # one Lease read for the whole burst


def test_a_release_with_a_group_or_placeholders_waits_for_the_pass() -> None:
    patches = _Patches()
    burst, _ = _burst(patches)
    release = _two_gangs().releases[0]
    burst.decided(replace(release, needs_group=True))
    burst.decided(replace(release, placeholders=release.pods[:1]))
    assert burst.early_count == 0 and patches.patched == []


@pytest.mark.parametrize(("leader", "early"), [(False, True), (True, False)])
def test_nothing_is_sent_early_unless_leading_and_asked(leader: bool, early: bool) -> None:
    patches = _Patches()
    burst, calls = _burst(patches, leader=leader, early=early)
    _two_gangs(burst.decided)
    assert burst.early_count == 0 and patches.patched == []
    assert "before-first" not in calls
    assert burst.confirmed() is leader
