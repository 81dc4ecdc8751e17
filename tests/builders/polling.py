"""The one poll-until-true loop of the tests (unit, http, e2e, deploy and README tests).

Unit and http tests poll threads of the same process that finish in milliseconds; e2e tests
poll an API server. So the first checks come quickly (10 ms apart, doubling) and later ones
`interval` apart: neither kind waits long for what is already true, nor hammers a server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: The first pause between checks; it doubles up to `interval`.
FIRST_PAUSE = 0.01


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.2,
    message: str = "",
) -> T:
    """Poll until `predicate()` is truthy and return its value; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    pause = min(FIRST_PAUSE, interval)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message or predicate}")
        time.sleep(pause)
        pause = min(pause * 2, interval)
