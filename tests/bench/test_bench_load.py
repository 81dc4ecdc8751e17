"""`python -m bench.load`: the pure figures, and the --quick command end to end.

The quick run starts its own sandbox (40 kwok nodes, 400 pods in 40 gangs of three
kinds) and must hold the load's guarantees: no pod lost, no gang partly bound, no
gang left gated that fits; its baseline (the same trace, released by the benchmark)
must settle too, so the ratio it reports compares two finished runs. Skipped
without the control plane binaries (failed under GANGKEEPER_E2E=require). Figures are
not judged here (shared, noisy machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from builders.binaries import need_sandbox_binaries

from bench.load import (
    GangSpec,
    _Burst,
    gang_mix,
    histogram_quantile,
    outcome,
    release_lags,
    stalled,
)
from bench.load_baseline import BASELINE_GATE, Releaser, place
from gangkeeper.webhook.kube.api import ApiError

ROOT = Path(__file__).resolve().parents[2]


def test_the_mix_has_the_sizes_and_kinds_asked_for_and_is_seeded() -> None:
    specs = gang_mix(1000)
    assert sum(s.size for s in specs) == 10_000
    kinds = {k: sum(1 for s in specs if s.kind == k) for k in ("pods", "job", "jobset")}
    assert kinds == {"pods": 600, "job": 300, "jobset": 100}
    assert {s.size for s in specs} == {2, 4, 8, 16, 32}
    assert {s.size for s in specs if s.kind == "job"} == {4, 8, 16}, "Jobs of several sizes"
    assert gang_mix(1000) == specs and len({s.name for s in specs}) == 1000


def test_histogram_quantiles_interpolate_within_a_bucket() -> None:
    buckets = [(0.001, 50.0), (0.01, 100.0), (float("inf"), 100.0)]
    assert histogram_quantile(buckets, 0.5) == pytest.approx(0.001)
    assert histogram_quantile(buckets, 0.75) == pytest.approx(0.0055)
    assert histogram_quantile([(float("inf"), 0.0)], 0.5) is None


def _pod(owner: str, bound: bool, label: str = "gangkeeper.io/gang") -> dict[str, object]:
    return {"metadata": {"labels": {label: owner}},
            "spec": {"nodeName": "n1"} if bound else {}}


def test_the_outcome_counts_lost_pods_and_partly_bound_gangs() -> None:
    specs = [GangSpec("pods", "whole", 2), GangSpec("job", "half", 2),
             GangSpec("jobset", "short", 3)]
    pods = [_pod("whole", True), _pod("whole", True),
            _pod("half", True, "job-name"), _pod("half", False, "job-name"),
            _pod("short", False, "jobset.sigs.k8s.io/jobset-name")]
    assert outcome(specs, pods) == {
        "gangs": 3, "pods_expected": 7, "pods_lost": 2, "gangs_partly_bound": 1,
        "gangs_bound": 1, "gangs_gated": 1,
    }


def test_quiet_is_a_stall_only_once_the_controller_has_planned_twice_meanwhile() -> None:
    # The first full run ended "stalled" while the controller, after a pass of a
    # minute, waited twice that before the next one: quiet, but not stuck.
    assert not stalled(300.0, 1.0)
    assert not stalled(60.0, 5.0)
    assert stalled(120.0, 2.0)


def test_the_lag_of_a_gang_runs_from_its_last_member_seen_to_its_last_gate_lifted() -> None:
    pods = [_pod("g", True), _pod("g", True), _pod("waits", False), _pod("gap", True)]
    for i, pod in enumerate(pods):
        pod["metadata"]["name"] = f"p{i}"  # type: ignore[index]
    seen = {"p0": 1.0, "p1": 3.0, "p2": 2.0, "p3": 2.0}
    ungated = {"p0": 3.5, "p1": 3.75}  # p2 still gated; p3's lift fell in a watch gap
    assert release_lags(pods, seen, ungated) == [0.75]


def test_the_baseline_places_a_whole_gang_round_robin_or_nothing() -> None:
    free = {"a": 1, "b": 2, "c": 0}
    assert place(4, free, 0) is None and free == {"a": 1, "b": 2, "c": 0}
    assert place(3, free, 1) == (["b", "a", "b"], 2)
    assert free == {"a": 0, "b": 0, "c": 0}


class _Patches:
    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []

    def request(self, method: str, path: str, body: object = None, **_: object) -> None:
        self.sent.append((path.rsplit("/", 1)[-1], body))


def _gated(gang: str, name: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {"job-name": gang}},
            "spec": {"schedulingGates": [{"name": BASELINE_GATE}]}}


def test_the_baseline_lifts_a_gang_pinned_once_all_its_members_exist_and_fit() -> None:
    from bench.load import owner

    rest = _Patches()
    releaser = Releaser(rest, {"fits": 2, "too-big": 3}, {"n1": 1, "n2": 2}, owner)
    releaser(_gated("fits", "fits-0"))
    releaser(_gated("fits", "fits-0"))  # seen again (a status update): not a second member
    assert releaser.undecided() == 2
    releaser(_gated("fits", "fits-1"))
    for name in ("big-0", "big-1", "big-2"):  # one GPU left: it stays gated
        releaser(_gated("too-big", name))
    releaser.close()
    assert releaser.undecided() == 0 and releaser.failures == []
    assert sorted(name for name, _ in rest.sent) == ["fits-0", "fits-1"]
    gates = "/spec/schedulingGates"
    for _, patch in rest.sent:  # the controller's patch: its own gate lifted, pinned
        assert isinstance(patch, list)
        assert {"op": "test", "path": gates, "value": [{"name": BASELINE_GATE}]} in patch
        assert {"op": "replace", "path": gates, "value": []} in patch
        [pin] = [op for op in patch if op["path"] == "/spec/affinity"]
        [term] = pin["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        assert term in ({"matchFields": [{"key": "metadata.name", "operator": "In",
                                           "values": [node]}]} for node in ("n1", "n2"))


class _Answers:
    """A POST that answers each status in turn (0: stored), as a loaded API server may."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)

    def request(self, method: str, path: str, body: object = None) -> None:
        status = self.statuses.pop(0)
        if status:
            raise ApiError(status, f"status {status}")


def test_a_create_whose_timed_out_attempt_was_stored_counts_as_created(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("bench.load.time.sleep", lambda _: None)
    pod = {"kind": "Pod", "metadata": {"name": "p"}}
    landed = _Burst(_Answers(504, 409))  # the 504'd POST was stored: the retry is a 409
    landed.create("/api/v1/namespaces/n/pods", pod)
    assert landed.failures == []
    refused = _Burst(_Answers(409))  # a first-try 409 is a real conflict
    refused.create("/api/v1/namespaces/n/pods", pod)
    assert len(refused.failures) == 1


def test_the_quick_load_loses_nothing_and_leaves_no_gang_half_done(tmp_path: Path) -> None:
    """With `--native`: then the same trace, whole, on the native backend beside it."""
    need_sandbox_binaries()
    out = tmp_path / "load.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.load", "--quick", "--native", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    [row] = json.loads(out.read_text())
    assert (row["pods_expected"], row["pods_lost"], row["create_failures"]) == (400, 0, 0)
    assert row["end"] == "settled", row
    assert row["gangs_partly_bound"] == 0 and row["gangs_left_gated_that_fit"] == 0
    assert row["gangs_bound"] + row["gangs_gated"] == 40
    assert row["gangs_bound"] > 0 and row["gangs_gated"] > 0, "some fit, some cannot"
    assert row["mutate_p50_ms"] is not None and row["plan_passes"] > 0
    assert row["mutate_idle_p99_ms"] is not None and row["plan_p99_ms"] is not None
    assert row["lifted_p99_s"] is not None, "released gangs were watched"
    assert row["baseline_end"] == "settled" and row["baseline_pods_lost"] == 0, row
    assert row["baseline_gangs_partly_bound"] == 0 and row["baseline_gangs_bound"] > 0
    assert row["baseline_release_failures"] == 0, row["failures_sample"]
    assert row["settle_ratio"] is not None and row["rss_gangkeeper_mb"] > 0
    # Per gang, its last bind comes after its last gate lifted (the same gangs: all bound).
    assert row["bound_p50_s"] >= row["lifted_p50_s"], row
    # Native: one PodGroup per gang, kube-scheduler places each whole or not at all.
    assert row["native_end"] == "settled" and row["native_pods_lost"] == 0, row
    assert row["native_podgroups"] == 40 and row["native_create_failures"] == 0, row
    assert row["native_gangs_partly_bound"] == 0, row
    assert row["native_gangs_bound"] > 0 and row["native_gangs_gated"] > 0, row
    assert row["native_settle_ratio"] is not None and row["native_bound_p99_s"] is not None
