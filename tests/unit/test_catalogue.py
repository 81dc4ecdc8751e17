"""One catalogue of metrics and Event reasons (`gangkeeper.policies.catalogue`):

- no product module spells a metric name or an Event reason outside it, and no
  `event_body` call is given a reason as a literal;
- a series of an undeclared metric, of another type or with other labels is refused
  where it is written, and an undeclared Event reason where its body is built;
- everything the server and the controller expose is declared, with the catalogue's
  type and help; the Grafana dashboards query only declared metrics.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import get_args

import pytest
from builders.gangs import T0, members, node
from kubernetes.client import ApiClient, Configuration

from gangkeeper.policies import catalogue
from gangkeeper.policies.catalogue import Metric
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import WaitCode
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller import GangController
from gangkeeper.webhook.controller.writes import event_body
from gangkeeper.webhook.series import Series, checked, render
from gangkeeper.webhook.server.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("policies", "webhook", "certs")
CATALOGUE = ROOT / "policies" / "catalogue.py"
#: `gangkeeper_` strings that are not metrics, and what they are.
NOT_METRICS = {
    "gangkeeper_argv": "sandbox state key: the argv `gangkeeper serve` was started with",
    "gangkeeper_url": "sandbox state key: the URL gangkeeper serves on",
    "gangkeeper_controller_argv": "sandbox state key: the argv of `serve --controller-only`",
    "gangkeeper_controller_url": "sandbox state key: the URL the gang controller serves on",
}
REASONS = {r.reason for r in catalogue.EVENT_REASONS}
ABOUT = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "namespace": "ns"}


def product_modules() -> list[Path]:
    return [p for d in PRODUCT for p in sorted((ROOT / d).rglob("*.py")) if p != CATALOGUE]


def strings(tree: ast.AST) -> list[tuple[int, str]]:
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_product_module_spells_a_metric_name() -> None:
    stray = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for path in product_modules()
        for line, value in strings(ast.parse(path.read_text()))
        if re.match(r"gangkeeper_\w", value) and value not in NOT_METRICS
    ]
    assert stray == []


def test_no_product_module_spells_an_event_reason_and_event_body_gets_no_literal() -> None:
    stray: list[str] = []
    for path in product_modules():
        tree = ast.parse(path.read_text())
        where = str(path.relative_to(ROOT))
        stray += [f"{where}:{line}: {value!r}" for line, value in strings(tree)
                  if value in REASONS]
        for call in ast.walk(tree):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name | ast.Attribute)
                    and getattr(call.func, "id", getattr(call.func, "attr", "")) == "event_body"
                    and len(call.args) > 1 and isinstance(call.args[1], ast.Constant)):
                stray.append(f"{where}:{call.lineno}: event_body({call.args[1].value!r})")
    assert stray == []


def test_an_event_takes_its_type_from_the_catalogue_and_an_undeclared_reason_is_refused(
) -> None:
    assert event_body(ABOUT, catalogue.GANG_MEMBER_REJOINED, "n", "me", T0)["type"] == "Normal"
    assert event_body(ABOUT, catalogue.GANG_INCOMPLETE, "n", "me", T0)["type"] == "Warning"
    with pytest.raises(ValueError, match="'GangSomethingNew' is not in"):
        event_body(ABOUT, "GangSomethingNew", "n", "me", T0)


def test_every_wait_cause_has_an_event_reason() -> None:
    assert set(catalogue.WAIT_REASONS) == {c for c in get_args(WaitCode) if c}


@pytest.mark.parametrize(("write", "message"), [
    (lambda s: s.add(Metric("gangkeeper_x_total", "counter", (), "x")), "not in"),
    (lambda s: s.add(catalogue.GANGS_STUCK), "is a gauge, not a counter"),
    (lambda s: s.add(catalogue.GANG_RELEASES),
     r"labels \[\], the catalogue declares \['backend'\]"),
    (lambda s: s.add(catalogue.GANG_REQUEUES, (("how", "delete"), ("cause", "rebind"))),
     r"labels \['how', 'cause'\]"),
    (lambda s: s.set(catalogue.CACHE_SYNCED, (("kind", "pods"),), 1), "labels"),
    (lambda s: s.observe(catalogue.GANG_RELEASES, 1.0), "is a counter, not a summary"),
], ids=["undeclared", "type", "labels missing", "labels order", "gauge labels", "summary"])
def test_a_series_the_catalogue_does_not_declare_is_refused_where_it_is_written(
    write: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        write(Series())  # type: ignore[operator]


def test_a_collector_sample_of_an_undeclared_metric_is_refused() -> None:
    with pytest.raises(ValueError, match="gangkeeper_made_up"):
        checked({("gangkeeper_made_up", ()): 1.0})
    with pytest.raises(ValueError, match="gangkeeper_gangs_stuck_sum"):
        checked({("gangkeeper_gangs_stuck_sum", ()): 1.0})  # a gauge has no _sum


def test_a_series_renders_with_the_catalogue_s_type_and_help() -> None:
    series = Series()
    series.add(catalogue.GANG_RELEASES, (("backend", "gate"),), 2)
    series.observe(catalogue.GANG_RELEASE_SECONDS, 0.5)
    text = render(series.samples())
    assert text.splitlines() == [
        f"# HELP gangkeeper_gang_release_seconds {catalogue.GANG_RELEASE_SECONDS.help}",
        "# TYPE gangkeeper_gang_release_seconds summary",
        "gangkeeper_gang_release_seconds_sum 0.5",
        "gangkeeper_gang_release_seconds_count 1",
        f"# HELP gangkeeper_gang_releases_total {catalogue.GANG_RELEASES.help}",
        "# TYPE gangkeeper_gang_releases_total counter",
        'gangkeeper_gang_releases_total{backend="gate"} 2',
    ]


def busy_controller() -> GangController:
    configuration = Configuration()
    configuration.host = "https://127.0.0.1:9"  # never contacted: the controller is idle
    controller = GangController(ApiClient(configuration), Config(), namespace="gk", identity="t")
    result = plan([pod_info(p, Config()) for p in members("a", 2)], [node("n", 8)], Config(), T0)
    controller.timings.released(result.releases[0], 0.01, T0 + 5)
    controller._last_plan = result
    controller.watchdog.send(controller.watchdog.actions(result, T0 + 9), T0 + 9)
    controller.series.add(catalogue.GANG_RELEASES, (("backend", "gate"),))
    return controller


def test_everything_the_server_and_controller_expose_is_declared_with_its_type_and_help() -> None:
    controller = busy_controller()
    checked(controller.metric_samples())
    checked(controller.timings.samples())
    metrics = Metrics()
    metrics.observe_admission("validate", "denied", "rejected", 0.001, "gang-too-big")
    metrics.set_certificate_expiry(T0)
    metrics.set_synced("pods", True)
    metrics.add_collector(controller.metric_samples)
    metrics.add_collector(controller.timings.samples)
    text = metrics.render()
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    helps = dict(re.findall(r"^# HELP (\S+) (.+)$", text, re.M))
    assert types and types.keys() == helps.keys()
    for name, kind in types.items():
        family = catalogue.metric(name)
        assert family is not None and (family.type, family.help) == (kind, helps[name]), name
    assert 'gangkeeper_gang_releases_total{backend="gate"} 1' in text
    assert "gangkeeper_gangs_partly_bound " in text  # the watchdog's gauges are there


@pytest.mark.parametrize("path", [
    ROOT / "deploy" / "grafana" / "gangkeeper-dashboard.json",
    ROOT / "deploy" / "helm" / "gangkeeper" / "files" / "dashboard.json",
], ids=["grafana", "helm"])
def test_the_dashboards_query_only_catalogued_metrics(path: Path) -> None:
    exprs = [t["expr"] for p in json.loads(path.read_text())["panels"] for t in p["targets"]]
    names = {n for e in exprs for n in re.findall(r"\bgangkeeper_[a-z0-9_]+", e)}
    assert names
    for name in names:
        family = catalogue.metric(re.sub(r"_(bucket|sum|count)$", "", name))
        assert family is not None, f"{path.name}: {name}"
        if name != family.name:
            assert family.type in ("histogram", "summary"), f"{path.name}: {name}"


def test_a_histogram_counts_each_observation_in_every_bucket_whose_bound_it_does_not_pass(
) -> None:
    series = Series()
    gate = (("backend", "gate"),)
    for seconds in (0.01, 0.02, 7.0, 11.0):  # 0.01 is a bound: it belongs to le="0.01"
        series.observe(catalogue.GATE_REMOVAL_DURATION, seconds, gate)
    samples = series.samples()
    name = catalogue.GATE_REMOVAL_DURATION.name
    buckets = {dict(labels)["le"]: value for (n, labels), value in samples.items()
               if n == f"{name}_bucket"}
    assert buckets == {"0.01": 1, "0.025": 2, "0.05": 2, "0.1": 2, "0.25": 2, "0.5": 2,
                       "1": 2, "2.5": 2, "5": 2, "10": 3, "+Inf": 4}
    assert samples[(f"{name}_count", gate)] == 4 and samples[(f"{name}_sum", gate)] == 18.03
