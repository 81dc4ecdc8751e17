"""`python -m bench`: a missing or failing benchmark is reported, the rest still run."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import bench.__main__ as entry


@pytest.fixture
def fake_benchmarks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    good = types.ModuleType("fake_bench_good")
    good.run = lambda quick: [{"case": "small" if quick else "big", "ratio": 1.5}]  # type: ignore[attr-defined]
    bad = types.ModuleType("fake_bench_bad")

    def explode(quick: bool) -> list[dict[str, object]]:
        raise RuntimeError("the load generator could not connect")

    bad.run = explode  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_bench_good", good)
    monkeypatch.setitem(sys.modules, "fake_bench_bad", bad)
    monkeypatch.setattr(
        entry,
        "BENCHMARKS",
        (
            ("good", "fake_bench_good", False),
            ("bad", "fake_bench_bad", False),
            ("absent", "fake_bench_absent_module", False),
        ),
    )
    yield


def test_every_benchmark_gets_a_result_whatever_happens(fake_benchmarks: None) -> None:
    results = {r["name"]: r for r in entry.run_all(quick=True)}
    assert results["good"]["status"] == "ok"
    assert results["good"]["rows"] == [{"case": "small", "ratio": 1.5}]
    assert results["bad"]["status"] == "failed"
    assert "could not connect" in results["bad"]["error"]
    assert results["absent"]["status"] == "missing"
    assert "fake_bench_absent_module" in results["absent"]["error"]


def test_main_writes_the_report_and_json_and_exits_1_when_any_failed(
    fake_benchmarks: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = entry.main(["--out", str(tmp_path), "--json", str(tmp_path / "raw.json")])
    assert code == 1
    printed = capsys.readouterr().out
    assert "| case | ratio |" in printed and "| big | 1.5 |" in printed
    assert (tmp_path / "report.md").read_text() == printed
    data = json.loads((tmp_path / "raw.json").read_text())
    assert [r["status"] for r in data["results"]] == ["ok", "failed", "missing"]
    assert data["machine"]["cores"] >= 1


def test_only_runs_the_named_subset_and_exits_0_when_it_passed(
    fake_benchmarks: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert entry.main(["--quick", "--only", "good", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert [r["name"] for r in data["results"]] == ["good"]


def test_an_unknown_name_in_only_is_a_usage_error(
    fake_benchmarks: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        entry.main(["--only", "good,nope"])
    assert exit_info.value.code == 2
    assert "nope" in capsys.readouterr().err


def test_benchmarks_that_take_a_cluster_share_one_sandbox(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import contextlib

    import bench.cluster

    started: list[object] = []
    seen: list[object] = []

    @contextlib.contextmanager
    def fake_open_cluster(quick: bool = True, log: object = None) -> Iterator[object]:
        cluster = types.SimpleNamespace(startup_seconds=0.0)
        started.append(cluster)
        yield cluster

    def run_on(quick: bool, cluster: object) -> list[dict[str, object]]:
        seen.append(cluster)
        return [{"quick": quick}]

    for name in ("fake_bench_c1", "fake_bench_c2"):
        module = types.ModuleType(name)
        module.run = run_on  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(bench.cluster, "open_cluster", fake_open_cluster)
    monkeypatch.setattr(
        entry, "BENCHMARKS", (("c1", "fake_bench_c1", False), ("c2", "fake_bench_c2", True))
    )
    results = entry.run_all(quick=True)
    assert [r["status"] for r in results] == ["ok", "ok"]
    assert len(started) == 1
    assert seen == [started[0], started[0]]


def test_only_a_full_run_replaces_the_committed_report() -> None:
    assert entry.default_out(quick=False, only=None) == Path("docs/bench")
    assert entry.default_out(quick=True, only=None) == Path("bench/results")
    assert entry.default_out(quick=False, only={"policy"}) == Path("bench/results")
