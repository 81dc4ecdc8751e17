"""`gangkeeper serve` refusing bad flags and files with a message.

A server that cannot start must say why in one line naming the flag or file (exit
code 2), never print a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "serve", "--port", "1", *args],
        capture_output=True, text=True, timeout=60, cwd=cwd, check=False,
    )


@pytest.mark.parametrize(
    ("files", "args", "needles"),
    [
        pytest.param({}, ["--nodes", "missing.yaml"], ["missing.yaml", "--nodes"],
                     id="fleet file missing"),
        pytest.param({"fleet.yaml": "apiVersion: v1\nkind: List\nitems: [{kind: Pod, "
                                    "apiVersion: v1, metadata: {name: x}}]\n"},
                     ["--nodes", "fleet.yaml"], ["fleet.yaml", "Node"],
                     id="fleet file holds no nodes"),
        pytest.param({"fleet.yaml": "a: [unclosed\n"}, ["--nodes", "fleet.yaml"],
                     ["fleet.yaml"], id="fleet file is not YAML"),
        pytest.param({"config.yaml": "backend: slurm\n"}, ["--config", "config.yaml"],
                     ["config.yaml", "backend", "slurm"], id="config with a bad value"),
        pytest.param({"config.yaml": "backnd: gate\n"}, ["--config", "config.yaml"],
                     ["config.yaml", "backnd"], id="config with an unknown key"),
        pytest.param({"config.yaml": "- a list\n"}, ["--config", "config.yaml"],
                     ["config.yaml", "mapping"], id="config that is not a mapping"),
        pytest.param({}, ["--config", "nope.yaml"], ["nope.yaml"], id="config file missing"),
        pytest.param({}, ["--kubeconfig", "nope.kubeconfig"], ["nope.kubeconfig"],
                     id="kubeconfig missing"),
        pytest.param({}, ["--header-timeout", "0"], ["--header-timeout", "positive"],
                     id="a request limit that is not positive"),
    ],
)
def test_a_bad_flag_or_file_stops_serve_with_a_message_naming_it(
    tmp_path: Path, files: dict[str, str], args: list[str], needles: list[str]
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = serve(*args, "--cert-dir", str(tmp_path / "certs"), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert all(n in result.stderr for n in needles), result.stderr
