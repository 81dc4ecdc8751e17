"""`gangkeeper serve` without `--cert-dir` keeps its keys in a state directory, never
in the working directory (in a checkout, `./certs` is the `gangkeeper.certs` package),
and says where in its first log line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from http_support import FLEET, Served, free_port, wait_ready


def test_serve_issues_its_certificates_into_the_state_directory(tmp_path: Path) -> None:
    work, state = tmp_path / "checkout", tmp_path / "state"
    (work / "certs").mkdir(parents=True)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gangkeeper.webhook.cli", "serve", "--nodes", str(FLEET),
             "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, cwd=work,
            env={**os.environ, "XDG_STATE_HOME": str(state)},
        )
    served = Served(f"https://127.0.0.1:{port}", state / "gangkeeper" / "certs", log, process)
    try:
        wait_ready(served)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert list((work / "certs").iterdir()) == []
    first = json.loads(served.log_lines()[0])
    assert first["cert_dir"] == str(served.cert_dir), first
    assert str(served.cert_dir) in first["msg"]


def test_without_xdg_state_home_the_state_directory_is_under_home(tmp_path: Path) -> None:
    from gangkeeper.webhook.cli.serve import default_cert_dir

    assert default_cert_dir({"HOME": str(tmp_path)}) == (
        tmp_path / ".local" / "state" / "gangkeeper" / "certs"
    )
    assert default_cert_dir({"HOME": "/h", "XDG_STATE_HOME": str(tmp_path)}) == (
        tmp_path / "gangkeeper" / "certs"
    )
    # The spec: a relative XDG_STATE_HOME is invalid and ignored.
    assert default_cert_dir({"HOME": str(tmp_path), "XDG_STATE_HOME": "rel"}) == (
        tmp_path / ".local" / "state" / "gangkeeper" / "certs"
    )
