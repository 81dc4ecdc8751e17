"""Fault injection for the end-to-end tests: stop the controller at a named step of a
release, deterministically, instead of racing a signal against a burst.

`GANGKEEPER_FAULT=ACTION:STEP[:N]` in the environment of one `gangkeeper serve`
makes its controller send itself ACTION (`kill` = SIGKILL, a crash with nothing
cleaned up; `stop` = SIGSTOP, a pause until someone sends SIGCONT) when it reaches
STEP, once per process:

- `before-group`: a release is planned, its group object not created yet;
- `mid-burst`: after the N-th gate of a burst is lifted (N defaults to 1);
- `after-burst`: every gate of the burst lifted, nothing counted or logged yet.

Unset (always, outside tests) it costs one dict lookup per step. Nothing else reads
the variable. May signal its own process only.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

log = logging.getLogger(__name__)

ENV = "GANGKEEPER_FAULT"
STEPS = ("before-group", "mid-burst", "after-burst")
ACTIONS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP}


class Faults:
    """The fault asked for in the environment (or none), fired at most once."""

    def __init__(self, spec: str | None = None) -> None:
        spec = os.environ.get(ENV, "") if spec is None else spec
        self._lock = threading.Lock()
        self._fired = False
        self._ungated = 0
        self.action: signal.Signals | None = None
        self.step = ""
        self.after = 1
        if not spec:
            return
        parts = spec.split(":")
        if len(parts) not in (2, 3) or parts[0] not in ACTIONS or parts[1] not in STEPS:
            raise ValueError(
                f"{ENV}={spec!r}: expected ACTION:STEP[:N] with ACTION in "
                f"{sorted(ACTIONS)} and STEP in {list(STEPS)}"
            )
        self.action, self.step = ACTIONS[parts[0]], parts[1]
        if len(parts) == 3:
            self.after = int(parts[2])
        # Logged now, not when firing: see `at`.
        log.warning("%s: will send %s to myself at %s (after %d)", ENV, self.action.name,
                    self.step, self.after)

    def at(self, step: str) -> None:
        """Fire if `step` is the one asked for (and it has not fired yet)."""
        if self.action is None or step != self.step:
            return
        with self._lock:
            if step == "mid-burst":
                self._ungated += 1
                if self._ungated < self.after:
                    return
            if self._fired:
                return
            self._fired = True
            # Signal first, still holding the lock and the GIL: anything that lets
            # other threads run (a log write does) lets the burst's other workers send
            # more patches, and on a loaded machine CI once saw all 60 of a burst sent
            # before a "stop after 10" took effect. os.kill keeps the GIL.
            os.kill(os.getpid(), self.action)
        # Reached only after SIGCONT (a SIGKILL never returns).
        log.warning("%s: resumed after %s at %s", ENV, self.action.name, step)
