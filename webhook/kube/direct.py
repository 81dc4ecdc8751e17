"""Plain keep-alive HTTPS requests to the API server, one connection per thread.

`Rest.request` goes through here when it can. A request through the kubernetes
`ApiClient` (parameter serialisation, urllib3's pool and retry machinery) cost about
1.5 ms of CPU; this path about half that. It counts when the controller lifts the
gates of a 1,000-pod gang in one burst, on the same cores as the API server it is
waiting for.

`DirectTransport.from_configuration(configuration)` reads what the `ApiClient` would
use: the server URL (with any path prefix), the CA (file or data), the client
certificate, TLS server name and verification switches, and the bearer token, asked
for on every request through `Configuration.auth_settings()` so a refreshed token
(in-cluster token file, exec plugins) is picked up. It answers None for what it does
not cover (a proxy, a non-HTTP URL), and the caller keeps the `ApiClient` path.

I/O only: sends what it is given and returns status, reason and body; decides nothing.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any

#: Connection errors after which one resend is safe: the server closed a kept-alive
#: connection (its idle timeout), so the request never reached it. Over TLS the write
#: onto such a connection fails with SSLEOFError (or the close_notify is read as
#: SSLZeroReturnError): seen when a thread's connection sat idle past the API server's
#: timeout during a long burst of other threads' creates.
_STALE = (
    http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
    ssl.SSLEOFError, ssl.SSLZeroReturnError,
)


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    body: bytes


class DirectTransport:
    """Per-thread `http.client` connections to one API server; see the module docstring."""

    def __init__(
        self,
        configuration: Any,
        *,
        host: str,
        port: int,
        prefix: str,
        context: ssl.SSLContext | None,
    ) -> None:
        self._configuration = configuration
        self._host = host
        self._port = port
        self._prefix = prefix
        self._context = context
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()

    @classmethod
    def from_configuration(cls, configuration: Any) -> DirectTransport | None:
        """A transport for this kubernetes `Configuration`, or None when it needs more
        than this module does (a proxy, a scheme other than http/https)."""
        if getattr(configuration, "proxy", None):
            return None
        url = urllib.parse.urlsplit(str(configuration.host or ""))
        if url.scheme not in ("http", "https") or not url.hostname:
            return None
        context: ssl.SSLContext | None = None
        if url.scheme == "https":
            context = _tls_context(configuration)
        return cls(
            configuration,
            host=url.hostname,
            port=url.port or (443 if url.scheme == "https" else 80),
            prefix=url.path.rstrip("/"),
            context=context,
        )

    def _connection(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._context is not None:
                server_name = getattr(self._configuration, "tls_server_name", None)
                conn = _HTTPSConnection(
                    self._host, self._port, context=self._context, server_name=server_name
                )
            else:
                conn = http.client.HTTPConnection(self._host, self._port)
            self._local.conn = conn
        if conn.sock is None:
            # About to connect (again, after close_all): closed with the others.
            with self._lock:
                self._open.add(conn)
        return conn

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        conn.close()
        self._local.conn = None
        with self._lock:
            self._open.discard(conn)

    def request(
        self,
        method: str,
        path_and_query: str,
        body: bytes | None,
        *,
        content_type: str,
        timeout: float,
    ) -> Answer:
        """One request on this thread's connection; one resend if it had gone stale."""
        headers = {"Accept": "application/json", "Content-Type": content_type,
                   "User-Agent": "gangkeeper"}
        auth = self._configuration.auth_settings().get("BearerToken")
        if auth and auth.get("value"):
            headers["Authorization"] = str(auth["value"])
        target = self._prefix + path_and_query
        for attempt in (1, 2):
            conn = self._connection()
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            reused = conn.sock is not None
            try:
                conn.request(method, target, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except _STALE:
                self._drop(conn)
                if attempt == 2 or not reused:
                    raise
                continue
            except BaseException:
                self._drop(conn)
                raise
            if response.will_close:
                self._drop(conn)
            return Answer(response.status, str(response.reason), data)
        raise AssertionError("unreachable")

    def close_all(self) -> None:
        """Close every open connection (any thread's), as urllib3's pool.clear() does:
        a later request opens a new one."""
        with self._lock:
            conns, self._open = self._open, set()
        for conn in conns:
            conn.close()


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS with a TLS server name other than the host when the kubeconfig says so."""

    def __init__(
        self, host: str, port: int, *, context: ssl.SSLContext, server_name: str | None
    ) -> None:
        super().__init__(host, port, context=context)
        self._server_name = server_name or host
        self._tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self._server_name)


def _tls_context(configuration: Any) -> ssl.SSLContext:
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert or None,
        cadata=getattr(configuration, "ca_cert_data", None) or None,
    )
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif getattr(configuration, "assert_hostname", None) is False:
        context.check_hostname = False
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context
