"""The small interface everything above `kube` talks to the API server through.

`Api` is what `Rest` (the real client) and `FakeApi` (in memory, for tests) both are:
one JSON request (`send` of a `Call`), a watch that yields parsed events, and closing
every open stream. Raw objects stay plain dicts; `ApiError` carries the HTTP status and
is the subclass for it (`NotFound`, `Conflict`, ...: gangkeeper.policies.errors).

Defines types only: no I/O here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangkeeper.policies.errors import (
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    Timeout,
    TooManyRequests,
)

__all__ = [
    "Api", "ApiError", "Call", "Conflict", "Forbidden", "Gone", "Invalid", "NotFound",
    "Query", "Timeout", "TooManyRequests",
]

Query = Sequence[tuple[str, str | int]]


@dataclass(frozen=True)
class Call:
    """One request as an `Api` implementation receives it."""

    method: str
    path: str
    query: Query = ()
    body: object = None
    content_type: str = "application/json"
    timeout: float = 30.0


class Api(ABC):
    """JSON requests and watches against one API server (`Rest`, `FakeApi`)."""

    def request(
        self, method: str, path: str, query: Query = (), body: object = None, *,
        content_type: str = "application/json", timeout: float = 30.0,
    ) -> dict[str, Any]:
        """One request; the parsed JSON answer, or ApiError for a non-2xx status."""
        return self.send(Call(method, path, tuple(query), body, content_type, timeout))

    def get(self, path: str, query: Query = (), *, timeout: float = 30.0) -> dict[str, Any]:
        return self.send(Call("GET", path, tuple(query), timeout=timeout))

    @abstractmethod
    def send(self, call: Call) -> dict[str, Any]:
        """What `request` and `get` do: one call, its parsed JSON answer."""

    @abstractmethod
    def watch(self, path: str, query: Query, timeout_seconds: int) -> Iterator[Mapping[str, Any]]:
        """Watch events of one request (bookmarks asked for); ends when the server ends it."""

    @abstractmethod
    def close_all(self) -> None:
        """End every open watch stream now (stopping must not wait for a socket read)."""
