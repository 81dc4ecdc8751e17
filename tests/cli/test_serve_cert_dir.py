"""`gangkeeper serve` with a `--cert-dir` it cannot create or write: one line naming
the directory and exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gangkeeper.webhook.cli.exit_codes import EXIT_BAD_INPUT

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "examples" / "fleet.yaml"


def serve(cert_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "serve", "--port", "1",
         "--nodes", str(FLEET), "--cert-mode", "files", "--cert-dir", str(cert_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )


def test_a_cert_dir_under_a_file_is_a_clear_error(tmp_path: Path) -> None:
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    proc = serve(in_the_way / "certs")
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert f"gangkeeper serve: --cert-dir {in_the_way / 'certs'}: cannot write" in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_cert_dir_is_a_clear_error(tmp_path: Path) -> None:
    read_only = tmp_path / "certs"
    read_only.mkdir(mode=0o500)
    proc = serve(read_only)
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert f"--cert-dir {read_only}: cannot write" in proc.stderr
