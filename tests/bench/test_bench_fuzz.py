"""`python -m bench.fuzz`, the hostile-input command of docs/reliability.md, in a short run.

Runs the command as docs/reliability.md shows it (it starts its own `gangkeeper serve`) with few
cases: it prints the table, writes the JSON row, exits 0, and `--case` replays one case.
The judging itself is tested in tests/http/test_http_fuzz.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _fuzz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.fuzz", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_fuzz_command_runs_judges_and_reports(tmp_path: Path) -> None:
    done = _fuzz("--cases", "300", "--json", str(tmp_path / "fuzz.json"))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "| cases | seconds | cases/s |" in done.stdout
    row = json.loads((tmp_path / "fuzz.json").read_text())
    assert row["cases"] == 300 and row["failure_count"] == 0 and row["server_alive"]
    assert row["server_errors"] == row["dropped"] == 0


def test_one_case_can_be_replayed_alone() -> None:
    done = _fuzz("--case", "11")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "case 11:" in done.stderr and "| 1 |" in done.stdout
