"""Driving `gangkeeper view` in headless Chromium, for the browser tests against a
`FakeApi` (tests/http/test_view_browser.py) and against the sandbox
(tests/e2e/test_view_e2e.py).

- `require_chromium`: skip without Chromium, saying what installs it; fail instead
  under GANGKEEPER_E2E=require (CI runs tests/support/chromium.sh first).
- `cell`: one cell of the queue table, read in one step.
- `ViewCommand`: `gangkeeper view` as the user runs it, a subprocess on a free loopback
  port, the URL (with its token) read from what it prints.

Starts processes (the command) and reads loopback only; the browser is
`bench.view_screenshots.chrome`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import httpx
import pytest

from bench.view_screenshots import missing
from builders.polling import wait_for


def require_chromium() -> None:
    reason = missing()
    if reason and os.environ.get("GANGKEEPER_E2E", "").lower() == "require":
        pytest.fail(f"GANGKEEPER_E2E=require: {reason}", pytrace=False)
    if reason:
        pytest.skip(reason)


def cell(driver: Any, gang: str, column: str) -> str | None:
    """The queue cell's text (None when the row is absent), read in one step: the
    page's script replaces rows while we look."""
    found = driver.execute_script(
        "const c = document.querySelector(arguments[0]); return c ? c.textContent : null;",
        f'tr[data-gang="{gang}"] td[data-col="{column}"]',
    )
    return None if found is None else str(found)


class ViewCommand:
    """`python -m gangkeeper.webhook.cli view --kubeconfig K --refresh S *args`, from
    start until its first snapshot is served (the page answers 200) to exit."""

    def __init__(self, kubeconfig: str, *args: str, refresh: float = 0.5) -> None:
        self.argv: Sequence[str] = (
            sys.executable, "-m", "gangkeeper.webhook.cli", "view", "--kubeconfig",
            kubeconfig, "--refresh", str(refresh), *args,
        )
        self.url = ""
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: Any = None

    def page(self, path: str = "/") -> str:
        """The URL of a page, with the printed token."""
        base, _, query = self.url.partition("/?")
        return f"{base}{path}?{query}"

    def __enter__(self) -> ViewCommand:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        # stderr to a file, not a pipe: nobody reads it while the test runs, and a full
        # pipe would block the server (it logs each failed read of the cluster).
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE,
                                      stderr=self._stderr, text=True, env=env)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        found = re.search(r"serving (http://127\.0\.0\.1:\d+/\?token=[\w-]+)", line)
        if found is None:
            raise AssertionError(f"gangkeeper view printed no URL: {line!r}; "
                                 f"stderr: {self._stop()}")
        self.url = found.group(1)

        def served() -> bool:
            assert self._proc is not None
            if self._proc.poll() is not None:
                code = self._proc.returncode
                raise AssertionError(f"gangkeeper view exited {code}: {self._stop()}")
            try:
                answer = httpx.get(self.url, timeout=5)
            except httpx.TransportError as exc:
                last[0] = str(exc)
                return False
            last[0] = f"{answer.status_code} {answer.text.strip()[:300]}"
            return answer.status_code == 200

        last = ["nothing"]
        try:
            wait_for(served, 60, 0.2, message=f"{self.url} serving a first snapshot")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its last answer: {last[0]}; "
                                 f"stderr: {self._stop()}") from None
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop()

    def _stop(self) -> str:
        """Stop the command (once); what it wrote to stderr."""
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.communicate(timeout=20)  # also closes the pipes
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.communicate()
            self._proc = None
        err = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            err = self._stderr.read()
            self._stderr.close()
            self._stderr = None
        return err
