"""Pending gangs by reason and the wait histograms, from plans.

Plain dicts through `pod_info` and `plan`, as the controller feeds `GangTimings`.
"""

from __future__ import annotations

from builders.gangs import T0, members, node

from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller.timings import PENDING_REASONS, GangTimings
from gangkeeper.webhook.server.metrics import Metrics

CONFIG = Config()


def planned(pods: list[dict[str, object]], now: float) -> object:
    infos = [pod_info(p, CONFIG) for p in pods]
    return plan(infos, [node("n1", 8)], CONFIG, now)


def bucket(samples: dict, name: str, le: str) -> float:
    return samples[(f"{name}_bucket", (("backend", "gate"), ("le", le)))]


def test_every_pending_reason_starts_at_zero() -> None:
    samples = GangTimings().samples()
    assert {k[1][0][1] for k in samples if k[0] == "gangkeeper_pending_gangs"} == set(
        PENDING_REASONS
    )
    assert all(v == 0 for k, v in samples.items() if k[0] == "gangkeeper_pending_gangs")


def test_pending_gangs_are_counted_by_reason() -> None:
    timings = GangTimings()
    result = planned(members("a", 4)[:2] + members("b", 16), T0 + 100)
    timings.observe(result.reports, T0 + 100)  # type: ignore[attr-defined]
    samples = timings.samples()
    assert samples[("gangkeeper_pending_gangs", (("reason", "incomplete"),))] == 1
    assert samples[("gangkeeper_pending_gangs", (("reason", "no-fit"),))] == 1


def test_release_and_all_bound_are_timed_from_the_last_member() -> None:
    timings = GangTimings()
    pods = members("a", 4)  # created T0 .. T0+3: the last member at T0+3
    result = planned(pods, T0 + 10)
    (release,) = result.releases  # type: ignore[attr-defined]
    timings.released(release, 0.04, T0 + 10)
    name = "gangkeeper_gang_last_member_to_release_seconds"
    samples = timings.samples()
    assert bucket(samples, name, "5") == 0 and bucket(samples, name, "10") == 1
    assert samples[(f"{name}_sum", (("backend", "gate"),))] == 7
    gate = "gangkeeper_gate_removal_duration_seconds"
    assert bucket(samples, gate, "0.025") == 0 and bucket(samples, gate, "0.05") == 1

    # Released, two of four bound: no all-bound observation yet.
    half = [dict(p) for p in pods]
    for i, p in enumerate(half):
        p["spec"] = {k: v for k, v in p["spec"].items() if k != "schedulingGates"}  # type: ignore[index, union-attr]
        if i < 2:
            p["spec"]["nodeName"] = "n1"  # type: ignore[index]
    timings.observe(planned(half, T0 + 20).reports, T0 + 20)  # type: ignore[attr-defined]
    samples = timings.samples()
    bound = "gangkeeper_gang_last_member_to_all_bound_seconds"
    assert (f"{bound}_count", (("backend", "gate"),)) not in samples

    for p in half:
        p["spec"]["nodeName"] = "n1"  # type: ignore[index]
    timings.observe(planned(half, T0 + 63).reports, T0 + 63)  # type: ignore[attr-defined]
    samples = timings.samples()
    assert samples[(f"{bound}_sum", (("backend", "gate"),))] == 60
    assert bucket(samples, bound, "30") == 0 and bucket(samples, bound, "60") == 1
    # Observed once: a later pass does not count it again.
    timings.observe(planned(half, T0 + 90).reports, T0 + 90)  # type: ignore[attr-defined]
    assert timings.samples()[(f"{bound}_count", (("backend", "gate"),))] == 1


def test_a_collectors_histogram_is_rendered_as_one_histogram_family() -> None:
    timings = GangTimings()
    (release,) = planned(members("a", 2), T0 + 5).releases  # type: ignore[attr-defined]
    timings.released(release, 0.2, T0 + 5)
    metrics = Metrics()
    metrics.add_collector(timings.samples)
    text = metrics.render()
    name = "gangkeeper_gang_last_member_to_release_seconds"
    assert f"# TYPE {name} histogram" in text
    assert f"# TYPE {name}_bucket" not in text and f"# TYPE {name}_sum" not in text
    lines = [line for line in text.splitlines() if line.startswith(f"{name}_bucket")]
    les = [line.split('le="')[1].split('"')[0] for line in lines]
    assert les == ["1", "2", "5", "10", "30", "60", "120", "300", "600", "1800", "3600", "+Inf"]
    assert f'{name}_count{{backend="gate"}} 1' in text
    assert 'gangkeeper_pending_gangs{reason="incomplete"} 0' in text
