"""`gangkeeper serve --log-format`: lines a person reads on a terminal, JSON for a
collector everywhere else."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest


def first_log_line(tmp_path: Path, *args: str) -> str:
    """serve's first line, then it stops on a bad limit (no port is opened)."""
    proc = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "serve", "--port", "1",
         "--cert-dir", str(tmp_path), "--header-timeout", "0", *args],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--header-timeout must be positive" in proc.stderr
    return proc.stderr.splitlines()[0]


def test_log_format_text_prints_a_line_for_people(tmp_path: Path) -> None:
    line = first_log_line(tmp_path, "--log-format", "text")
    assert not line.startswith("{"), line
    assert " info " in line and f"certificates in {tmp_path}" in line
    assert f"cert_dir={tmp_path}" in line


def test_log_format_json_and_the_default_off_a_terminal_is_json(tmp_path: Path) -> None:
    for args in (("--log-format", "json"), ()):
        entry = json.loads(first_log_line(tmp_path, *args))
        assert entry["level"] == "info" and entry["cert_dir"] == str(tmp_path)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stream", "expected"), [(Terminal(), "text"), (io.StringIO(), "json")])
def test_the_default_is_text_on_a_terminal_and_json_otherwise(
    stream: io.StringIO, expected: str
) -> None:
    from gangkeeper.webhook.server.logs import default_format

    assert default_format(stream) == expected
