"""The tables of metrics and Event reasons (docs/metrics.md) say exactly what
`gangkeeper.policies.catalogue` declares, and the README and docs name no other
`gangkeeper_` metric."""

from __future__ import annotations

import re
from pathlib import Path

from gangkeeper.policies import catalogue

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TABLES = ROOT / "docs" / "metrics.md"
METRIC_ROW = re.compile(r"^\| `(gangkeeper_[a-z0-9_]+)` \| (\w+) \| ([^|]+) \| ([^|]+) \|$")
REASON_ROW = re.compile(r"^\| `([A-Z][A-Za-z]+)` \| (Normal|Warning) \| ([^|]+) \|$")
METRIC_NAME = re.compile(r"\bgangkeeper_[a-z0-9_]*[a-z0-9]")


def section() -> str:
    return TABLES.read_text()


def test_the_readme_lists_every_metric_with_its_type_labels_and_help() -> None:
    rows = {
        m[1]: (m[2], tuple(re.findall(r"`([a-z_]+)`", m[3])), m[4].strip())
        for line in section().splitlines()
        if (m := METRIC_ROW.match(line))
    }
    assert rows == {m.name: (m.type, m.labels, m.help) for m in catalogue.METRICS}


def test_the_readme_lists_every_event_reason_with_its_type_and_when() -> None:
    rows = {
        m[1]: (m[2], m[3].strip())
        for line in section().splitlines()
        if (m := REASON_ROW.match(line))
    }
    assert rows == {r.reason: (r.type, r.when) for r in catalogue.EVENT_REASONS}


def test_the_readme_and_docs_name_only_catalogued_metrics() -> None:
    for path in (README, *sorted((ROOT / "docs").glob("*.md"))):
        for name in METRIC_NAME.findall(path.read_text()):
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            assert catalogue.metric(family) is not None, f"{path.name}: {name}"
