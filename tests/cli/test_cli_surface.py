"""The command line as a new user first meets it: `--version`, `--help` of every
sub-command, and output piped into `head`."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from builders.gangs import T0, members, node

from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.cli import build_parser, cluster_state
from gangkeeper.webhook.cli.cluster_state import ClusterState

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "examples" / "fleet.yaml"
#: `3.14573e+06`: a number `:g` rendered for a machine, not for a reader.
E_NOTATION = re.compile(r"\d(\.\d+)?e[+-]\d+")


def gangkeeper(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )


def test_version_prints_the_projects_version_and_exits_0() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    proc = gangkeeper("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"gangkeeper {version}"


def parsers(
    parser: argparse.ArgumentParser, name: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


ALL_PARSERS = list(parsers(build_parser(), "gangkeeper"))


@pytest.mark.parametrize(("name", "parser"), ALL_PARSERS, ids=[n for n, _ in ALL_PARSERS])
def test_every_option_has_help_and_no_number_in_e_notation(
    name: str, parser: argparse.ArgumentParser
) -> None:
    missing = [
        "/".join(a.option_strings) or a.dest
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction)
        and a.help != argparse.SUPPRESS and not (a.help or "").strip()
    ]
    assert not missing, f"{name}: no help for {', '.join(missing)}"
    text = parser.format_help()
    assert not E_NOTATION.search(text), f"{name} --help shows {E_NOTATION.search(text)}"


def test_serve_help_shows_the_limits_as_a_person_reads_them() -> None:
    text = dict(ALL_PARSERS)["gangkeeper serve"].format_help()
    assert "3 MiB" in text
    assert "1000 connections" in text


def test_output_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path: Path) -> None:
    """`gangkeeper check ... | head -1`: more output than a pipe holds, read one line,
    close the pipe."""
    many = tmp_path / "many.yaml"
    many.write_text("---\n".join(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n" for i in range(3000)
    ))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "check", "-f", str(many),
         "--nodes", str(FLEET), "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    with proc.stderr:
        stderr = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert first.strip() == b"["
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert code in (0, 141), stderr


def test_check_prints_the_json_records_as_yaml_with_o_yaml() -> None:
    files = ("-f", str(ROOT / "examples" / "job-fits.yaml"), "-f",
             str(ROOT / "examples" / "job-too-big.yaml"), "--nodes", str(FLEET))
    as_json = gangkeeper("check", *files, "-o", "json")
    as_yaml = gangkeeper("check", *files, "-o", "yaml")
    assert as_yaml.returncode == as_json.returncode == 1, as_yaml.stderr
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)


def test_status_prints_its_json_records_as_yaml_with_o_yaml(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = ClusterState(
        Config(), rest=None, pods=members("g", 2, namespace="ml", created=T0),  # type: ignore[arg-type]
        nodes=[node("gpu-a", 4)],
    )
    monkeypatch.setattr(cluster_state, "read_cluster_state", lambda _args: state)
    outputs = {}
    for output in ("json", "yaml"):
        args = build_parser().parse_args(["status", "-o", output])
        assert args.run(args) == 0
        outputs[output] = capsys.readouterr().out
    records = json.loads(outputs["json"])
    assert [r["gang"] for r in records] == ["g"]
    assert yaml.safe_load(outputs["yaml"]) == records
