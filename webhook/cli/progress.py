"""What a long command is doing and how far along it is, for a person waiting.

`Progress("sandbox", total=N)` is called with each step's message. On a terminal the
current step stays on one line that counts its seconds (`sandbox [3/9] starting
kube-apiserver … 4s`) and, when the next step starts, is closed with how long it
took; in CI (`CI` set), with `TERM=dumb` or when stderr is not a terminal (a pipe, a
log file), every step is one plain line (`sandbox [3/9] starting kube-apiserver`)
and nothing is rewritten.

I/O: writes to the stream it is given (stderr by default) and, on a terminal, runs
one daemon thread that refreshes the line once a second.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

#: Erase the terminal line and return to its start.
_REWRITE = "\r\033[K"


def is_live(stream: TextIO) -> bool:
    """Whether `stream` is a terminal a person watches (not CI, not a pipe)."""
    if os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """Steps of one long command; call it with each step's message."""

    def __init__(
        self,
        name: str,
        total: int | None = None,
        *,
        stream: TextIO | None = None,
        live: bool | None = None,
        tick: float = 1.0,
    ) -> None:
        self.name = name
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.live = is_live(self.stream) if live is None else live
        self.count = 0
        self._tick = tick
        self._lock = threading.Lock()
        self._current = ""
        self._since = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _counter(self) -> str:
        if self.total:
            return f"[{min(self.count, self.total)}/{self.total}]"
        return f"[{self.count}]"

    def __call__(self, message: str) -> None:
        with self._lock:
            self._close_step()
            self.count += 1
            self._current = f"{self.name} {self._counter()} {message}"
            self._since = time.monotonic()
            if self.live:
                self._draw()
                if self._thread is None:
                    self._thread = threading.Thread(target=self._refresh, daemon=True)
                    self._thread.start()
            else:
                self.stream.write(self._current + "\n")
            self.stream.flush()

    def note(self, message: str) -> None:
        """A line that is not a step (a result, a hint), printed as is."""
        with self._lock:
            self._close_step()
            self.stream.write(f"{self.name}: {message}\n")
            self.stream.flush()

    def finish(self) -> None:
        """Close the last step (on a terminal: with its duration) and stop refreshing."""
        self._stop.set()
        with self._lock:
            self._close_step()
            self.stream.flush()

    def _close_step(self) -> None:
        if self.live and self._current:
            seconds = time.monotonic() - self._since
            self.stream.write(f"{_REWRITE}{self._current} ({seconds:.1f}s)\n")
        self._current = ""

    def _draw(self) -> None:
        seconds = time.monotonic() - self._since
        self.stream.write(f"{_REWRITE}{self._current} … {seconds:.0f}s")

    def _refresh(self) -> None:
        while not self._stop.wait(self._tick):
            with self._lock:
                if self._current:
                    self._draw()
                    self.stream.flush()
