"""`gangkeeper ungate` on bad input: a clear error naming the file, exit 2, no trace.

Its behaviour on a cluster is tested end to end (tests/e2e/test_ungate.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def ungate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "ungate", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )


def test_a_missing_kubeconfig_is_named_and_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.kubeconfig"
    done = ungate("--kubeconfig", str(missing))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("gangkeeper ungate: ") and str(missing) in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_config_file_is_named_and_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("backend: [not, a, backend]\n")
    done = ungate("--config", str(config), "--kubeconfig", str(tmp_path / "k"))
    assert done.returncode == 2
    assert "config.yaml" in done.stderr and "Traceback" not in done.stderr


def test_help_says_what_force_gives_up() -> None:
    done = ungate("--help")
    assert done.returncode == 0
    assert "--force" in done.stdout and "partly" in done.stdout
