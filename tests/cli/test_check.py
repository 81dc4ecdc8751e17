"""`gangkeeper check` as a user runs it: exit codes, JSON records, errors naming files.

Every manifest in examples/ goes through the real command; its file name says the
verdict the sample fleet must give (`*-fits.yaml` admitted, `*-too-big.yaml` rejected).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FLEET = EXAMPLES / "fleet.yaml"
RECORD_KEYS = {
    "kind",
    "namespace",
    "name",
    "gang",
    "minMember",
    "demand",
    "verdict",
    "reason",
    "warnings",
}


def gangkeeper(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def examples(suffix: str) -> list[Path]:
    return sorted(EXAMPLES.glob(f"*-{suffix}.yaml"))


def check_json(*files: Path, nodes: Path = FLEET) -> tuple[int, list[dict[str, object]]]:
    args = [a for f in files for a in ("-f", str(f))]
    proc = gangkeeper("check", *args, "--nodes", str(nodes), "-o", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_the_examples_cover_both_verdicts() -> None:
    assert len(examples("fits")) >= 3
    assert len(examples("too-big")) >= 3


@pytest.mark.parametrize("path", examples("fits"), ids=lambda p: p.name)
def test_a_fitting_example_is_admitted_with_exit_0(path: Path) -> None:
    code, records = check_json(path)
    assert code == 0
    gangs = [r for r in records if r["gang"] is not None]
    assert gangs, "a fitting example must contain at least one gang"
    assert all(r["verdict"] == "admit" for r in records)
    assert all(set(r) == RECORD_KEYS for r in records)


@pytest.mark.parametrize("path", examples("too-big"), ids=lambda p: p.name)
def test_an_impossible_example_is_rejected_with_exit_1_and_numbers(path: Path) -> None:
    code, records = check_json(path)
    assert code == 1
    rejected = [r for r in records if r["verdict"] == "reject"]
    assert rejected
    for record in rejected:
        reason = str(record["reason"])
        assert str(record["gang"]) in reason
        assert any(ch.isdigit() for ch in reason), reason
        demand = record["demand"]
        assert isinstance(demand, dict) and demand and all(v > 0 for v in demand.values())


def test_one_rejected_gang_among_admitted_ones_makes_the_exit_code_1() -> None:
    code, records = check_json(examples("fits")[0], examples("too-big")[0])
    assert code == 1
    assert {r["verdict"] for r in records} == {"admit", "reject"}


def test_an_object_that_is_not_a_gang_gets_an_admit_record_with_null_min_member(
    tmp_path: Path,
) -> None:
    cm = tmp_path / "cm.yaml"
    cm.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: ml}\n")
    code, records = check_json(cm)
    assert code == 0
    assert records == [
        {
            "kind": "ConfigMap",
            "namespace": "ml",
            "name": "settings",
            "gang": None,
            "minMember": None,
            "demand": {},
            "verdict": "admit",
            "reason": "not a gang",
            "warnings": [],
        }
    ]


def test_text_output_names_the_verdict_and_the_gang() -> None:
    path = examples("too-big")[0]
    proc = gangkeeper("check", "-f", str(path), "--nodes", str(FLEET))
    assert proc.returncode == 1
    assert "reject" in proc.stdout


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("a: [unclosed\n", "not valid YAML"),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 2\n"
            "  template:\n    spec:\n      containers:\n      - name: c\n        image: i\n"
            "        resources: {limits: {nvidia.com/gpu: '1.5'}}\n",
            "nvidia.com/gpu",
        ),
    ],
    ids=["broken-yaml", "fractional-gpu"],
)
def test_bad_input_exits_2_naming_the_file(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    proc = gangkeeper("check", "-f", str(path), "--nodes", str(FLEET))
    assert proc.returncode == 2
    assert str(path) in proc.stderr
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_missing_nodes_file_exits_2() -> None:
    proc = gangkeeper("check", "-f", str(examples("fits")[0]), "--nodes", "/nonexistent/fleet.yaml")
    assert proc.returncode == 2
    assert "/nonexistent/fleet.yaml" in proc.stderr


def test_kubectl_get_nodes_output_works_as_the_fleet(tmp_path: Path) -> None:
    """`kubectl get nodes -o json` prints a NodeList; check must accept it as --nodes."""
    import yaml

    nodes = [d for d in yaml.safe_load_all(FLEET.read_text()) if d]
    items = nodes[0]["items"] if nodes[0].get("kind") == "List" else nodes
    node_list = tmp_path / "nodes.json"
    node_list.write_text(json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": items}))
    code, _ = check_json(examples("too-big")[0], nodes=node_list)
    assert code == 1
