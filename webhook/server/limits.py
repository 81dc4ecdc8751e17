"""Request limits like the API server's own HTTP server keeps, for one uvicorn worker.

One asyncio worker serves every admission, so a client that is slow on purpose must not
hold what a good request needs. uvicorn bounds idle keep-alive connections
(`timeout_keep_alive`) and, optionally, how many are open (`limit_concurrency`), but
nothing bounds how long a request's head may take or how large it may grow (httptools
has no limit; uvicorn's `h11_max_incomplete_event_size` applies to the h11 parser only).
`Limits` holds every bound; `guarded_protocol(limits)` is uvicorn's httptools protocol
with the two that are missing:
  - a head deadline: the request line and headers must be complete `header_timeout`
    seconds after the connection opens or the request's first byte arrives, else the
    connection is closed (Go's `ReadHeaderTimeout`, which the API server sets);
  - a head size cap: more than `max_header_bytes` before the headers end gets 431 and
    the connection is closed (Go's `MaxHeaderBytes`).
The body's size (413) and deadline (408) are enforced by the app while it reads the
body (`app._read_body`), where the answer can be a JSON error like every other 4xx.
The protocol also puts the TLS client's verified certificate subject (or None) in each
request's scope as the ASGI TLS extension's `client_cert_name`, for `serve --client-ca`.

Does network I/O only through the transport uvicorn gives the protocol.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .admission import MAX_BODY_BYTES


@dataclass(frozen=True)
class Limits:
    """Every bound on one request and on the connections (seconds, bytes, count)."""

    #: The API server caps its own request bodies at 3 MiB; see admission.MAX_BODY_BYTES.
    max_body_bytes: int = MAX_BODY_BYTES
    #: Request line + headers, from the connection (or the request's first byte) on.
    #: Twice the webhooks' timeoutSeconds (5): the API server has given up by then.
    header_timeout: float = 10.0
    #: The whole body, from the end of the headers on (3 MiB on a slow link takes < 1 s).
    body_timeout: float = 10.0
    #: The API server sends a few hundred bytes of headers; Go's default cap is 1 MiB.
    max_header_bytes: int = 64 * 1024
    #: Idle keep-alive connections are closed after this. The API server's webhook client
    #: keeps idle connections for up to 90 s and does not retry a POST whose reused
    #: connection the server just closed (seen as "EOF" on pod create): outlive it.
    idle_timeout: float = 120.0
    #: Open connections + running requests; past it uvicorn answers 503 at once instead
    #: of queueing (a flood cannot pile up memory). The API server opens a few per replica.
    max_connections: int = 1000

    def uvicorn_options(self) -> dict[str, Any]:
        """The uvicorn.Config arguments these limits set."""
        return {
            "http": guarded_protocol(self),
            "timeout_keep_alive": self.idle_timeout,
            "limit_concurrency": self.max_connections,
            # Only read by the h11 parser; set so the cap holds if uvicorn falls back to it.
            "h11_max_incomplete_event_size": self.max_header_bytes,
        }


_HEAD_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
)


def _subject(peer: dict[str, Any]) -> str:
    """The certificate subject as `CN=...,O=...` (most specific first, as RFC 4514)."""
    names = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU"}
    return ",".join(
        f"{names.get(key, key)}={value}"
        for rdn in reversed(peer.get("subject", ())) for key, value in rdn
    )


def client_cert_name(scope: Any) -> str | None:
    """The verified client certificate's subject the protocol put in `scope`, if any."""
    tls = (scope.get("extensions") or {}).get("tls") or {}
    name = tls.get("client_cert_name")
    return name if isinstance(name, str) and name else None


def guarded_protocol(limits: Limits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with a head deadline and a head size cap."""

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None
        _head_bytes = 0
        _in_head = False
        _client_name: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            # The handshake is over by now: the certificate (if any) was verified in it.
            ssl_object = transport.get_extra_info("ssl_object")
            peer = ssl_object.getpeercert() if ssl_object is not None else None
            self._client_name = _subject(peer) if peer else None
            self._start_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            if self._in_head and self._head_bytes > limits.max_header_bytes:
                self._refuse_head()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if not self._in_head:
                # A keep-alive connection's next request: its head gets the full deadline.
                self._start_head()

        def on_headers_complete(self) -> None:
            self._stop_head()
            self.scope["extensions"] = {"tls": {"client_cert_name": self._client_name}}
            super().on_headers_complete()

        def _start_head(self) -> None:
            self._in_head = True
            self._head_bytes = 0
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(limits.header_timeout, self._head_late)

        def _stop_head(self) -> None:
            self._in_head = False
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            # As Go's ReadHeaderTimeout: no answer is owed to a request that never arrived.
            self._head_timer = None
            if self._in_head and not self.transport.is_closing():
                self.logger.warning("closing a connection whose request head was too slow")
                self.transport.close()

        def _refuse_head(self) -> None:
            self._stop_head()
            if self.transport.is_closing():
                return
            body = b'{"error":"request headers are over the limit of %d bytes"}' % (
                limits.max_header_bytes
            )
            self.transport.write(_HEAD_TOO_LARGE % (len(body), body))
            self.transport.close()

    return GuardedHttpToolsProtocol
