"""Nothing `gangkeeper certs --dir certs` or `serve --cert-dir certs` writes into a
checkout's `certs/` is ever committed: keys, certificates, and the lock file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gangkeeper.certs import ensure_local

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout"
)
def test_every_file_issued_into_certs_is_ignored_by_git(tmp_path: Path) -> None:
    ensure_local(tmp_path, ["localhost"], ["127.0.0.1"])
    written = sorted(p.name for p in tmp_path.iterdir())
    assert len(written) >= 5  # four PEM files and the lock
    for name in written:
        ignored = subprocess.run(
            ["git", "check-ignore", "--no-index", "-q", f"certs/{name}"],
            cwd=ROOT, check=False, timeout=30,
        )
        assert ignored.returncode == 0, f"certs/{name} is not in .gitignore"
