"""The one poll-until-true loop of the tests (e2e, deploy and README tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    interval: float = 0.2,
    message: str = "",
) -> T:
    """Poll until `predicate()` is truthy and return its value; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message or predicate}")
        time.sleep(interval)
