"""The Grafana dashboard `deploy/grafana/gangkeeper-dashboard.json`.

- it is a Grafana dashboard model: parsed by Grafana's own model classes
  (`grafana-foundation-sdk`), every key survives the round trip (a misspelt or
  misplaced key would be dropped), every panel's type has its options class and every
  query is a Prometheus query;
- every panel's query names only series gangkeeper exports: the names are taken from
  what `/metrics` renders with the admission server's series, the gang controller's
  and the wait histograms, not from a list kept by hand.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from builders.gangs import T0, members, node
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import prometheus, stat, timeseries
from grafana_foundation_sdk.models.dashboard import Dashboard
from kubernetes.client import ApiClient, Configuration

from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller import GangController
from gangkeeper.webhook.server.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "gangkeeper-dashboard.json"
OPTIONS = {"stat": stat.Options, "timeseries": timeseries.Options}
METRIC = re.compile(r"\bgangkeeper_[a-z0-9_]+")


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


@functools.cache
def exported_families() -> frozenset[str]:
    """The metric families `/metrics` has once every part has something to say."""
    configuration = Configuration()
    configuration.host = "https://127.0.0.1:9"  # never contacted: the controller is idle
    controller = GangController(ApiClient(configuration), Config(), namespace="gk", identity="t")
    result = plan([pod_info(p, Config()) for p in members("a", 2)], [node("n", 8)], Config(), T0)
    controller.timings.released(result.releases[0], 0.01, T0 + 5)
    bound = members("a", 2, gates=(), node_name="n")
    later = plan([pod_info(p, Config()) for p in bound], [node("n", 8)], Config(), T0 + 9)
    controller.timings.observe(later.reports, T0 + 9)
    # Its gauges exist after its first pass.
    controller.watchdog.send(controller.watchdog.actions(later, T0 + 9), T0 + 9)
    metrics = Metrics()
    metrics.observe_admission("validate", "denied", "rejected", 0.001, "gang-too-big")
    metrics.set_certificate_expiry(T0 + 86400)
    metrics.set_synced("pods", True)
    metrics.add_collector(controller.metric_samples)
    metrics.add_collector(controller.timings.samples)
    text = metrics.render()
    return frozenset(re.findall(r"^# TYPE (\S+) ", text, re.M))


def queries() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in dashboard()["panels"] for t in p["targets"]]


def _lost_keys(given: Any, kept: Any, path: str = "") -> list[str]:
    if isinstance(given, dict):
        if not isinstance(kept, dict):
            return [path or "/"]
        lost = [f"{path}/{k}" for k in given if k not in kept]
        return lost + [
            x for k in given if k in kept for x in _lost_keys(given[k], kept[k], f"{path}/{k}")
        ]
    if isinstance(given, list):
        if not isinstance(kept, list) or len(kept) != len(given):
            return [path]
        pairs = enumerate(zip(given, kept, strict=True))
        return [x for i, (a, b) in pairs for x in _lost_keys(a, b, f"{path}[{i}]")]
    return [] if given == kept else [f"{path}: {given!r} became {kept!r}"]


def test_the_dashboard_is_a_grafana_dashboard_model() -> None:
    register_default_plugins()
    data = dashboard()
    model = Dashboard.from_json(data)
    assert _lost_keys(data, json.loads(JSONEncoder().encode(model))) == []
    assert model.title == "gangkeeper" and model.uid == "gangkeeper"
    assert model.panels, "no panels"
    for panel, raw in zip(model.panels, data["panels"], strict=True):
        assert isinstance(panel.options, OPTIONS[raw["type"]]), panel.title  # type: ignore[union-attr]
        assert panel.targets, panel.title  # type: ignore[union-attr]
        for target in panel.targets:  # type: ignore[union-attr]
            assert isinstance(target, prometheus.Dataquery), panel.title  # type: ignore[union-attr]


def test_panels_do_not_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard()["panels"]:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


@pytest.mark.parametrize(("title", "expr"), queries(), ids=[t for t, _ in queries()])
def test_every_query_names_only_metrics_gangkeeper_exports(title: str, expr: str) -> None:
    names = METRIC.findall(expr)
    assert names, f"{title}: no gangkeeper metric in {expr!r}"
    exported = exported_families()
    for name in names:
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert family in exported, f"{title}: {name} is not exported (have {sorted(exported)})"
        if name != family:  # a histogram series: the family must be a histogram
            assert family + "_count" not in exported


def test_the_issue_s_panels_are_there() -> None:
    exprs = " ".join(e for _, e in queries())
    for wanted in (
        "gangkeeper_pending_gangs",
        "histogram_quantile(0.5, sum by (le) (rate(gangkeeper_gang_last_member_to_release",
        "histogram_quantile(0.95, sum by (le) (rate(gangkeeper_gang_last_member_to_release",
        "gangkeeper_admission_decisions_total",
        "histogram_quantile(0.99, sum by (le, endpoint) (rate(gangkeeper_admission_duration",
        "gangkeeper_certificate_expiry_timestamp_seconds",
    ):
        assert wanted in exprs
