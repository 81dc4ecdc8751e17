"""Progress of long commands: rewritten in place on a terminal, plain lines in CI."""

from __future__ import annotations

import io
import time

import pytest

from gangkeeper.webhook.cli.progress import Progress, is_live


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = Progress("sandbox", 3, stream=out)
    progress("starting etcd")
    progress("starting kube-apiserver")
    progress.note("up in 9.0s")
    progress.finish()
    assert out.getvalue() == (
        "sandbox [1/3] starting etcd\nsandbox [2/3] starting kube-apiserver\nsandbox: up in 9.0s\n"
    )


def test_a_terminal_gets_one_line_per_step_rewritten_with_its_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # CI sets CI=true, which rightly turns the live line off; this test is about a person's
    # terminal, so it must not inherit the runner's environment.
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    out = Terminal()
    progress = Progress("sandbox", 2, stream=out, tick=0.05)
    assert progress.live
    progress("starting etcd")
    time.sleep(0.2)  # the refresher redraws the line with the seconds so far
    progress("starting kube-apiserver")
    progress.finish()
    text = out.getvalue()
    assert text.count("\r\033[K") >= 3
    finished = [line for line in text.split("\n") if line]
    assert finished[0].endswith("s)") and "sandbox [1/2] starting etcd (" in finished[0]
    assert "sandbox [2/2] starting kube-apiserver (" in finished[-1]
    assert text.endswith("s)\n")


@pytest.mark.parametrize(("env", "value"), [("CI", "true"), ("TERM", "dumb")])
def test_ci_and_dumb_terminals_get_plain_lines(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str
) -> None:
    monkeypatch.setenv(env, value)
    assert not is_live(Terminal())
