"""The test-only fault injector (`GANGKEEPER_FAULT`): it fires once, at the N-th gate
of a burst, and signals before it does anything that lets the burst's other workers
run (a log write releases the GIL; CI once saw a whole 60-pod burst sent before a
"stop after 10" took effect). `os.kill` is swapped for a recorder; nothing is sent.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest

from gangkeeper.webhook.controller import faults


@pytest.fixture
def record(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []
    monkeypatch.setattr(faults.os, "kill", lambda pid, sig: seen.append(("kill", sig)))
    monkeypatch.setattr(faults.log, "warning", lambda *a: seen.append(("log", a[0])))
    return seen


def test_mid_burst_fires_once_at_the_nth_gate_and_signals_before_logging(
    record: list[tuple[str, Any]],
) -> None:
    fault = faults.Faults("stop:mid-burst:3")
    record.clear()  # the arming message, logged at start
    for _ in range(2):
        fault.at("mid-burst")
    assert record == []
    fault.at("mid-burst")
    assert record[0] == ("kill", signal.SIGSTOP), "nothing may run before the signal"
    for _ in range(5):
        fault.at("mid-burst")
    assert [kind for kind, _ in record].count("kill") == 1


def test_other_steps_and_no_fault_never_signal(record: list[tuple[str, Any]]) -> None:
    faults.Faults("kill:after-burst").at("before-group")
    faults.Faults("").at("mid-burst")
    assert not any(kind == "kill" for kind, _ in record)


@pytest.mark.parametrize("spec", ["kill", "pause:mid-burst", "kill:midburst", "a:b:c:d"])
def test_a_malformed_spec_names_the_variable(spec: str) -> None:
    with pytest.raises(ValueError, match=faults.ENV):
        faults.Faults(spec)
