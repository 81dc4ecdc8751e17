"""Request limits of `gangkeeper serve` over real TLS: slow and stalled clients, big heads.

The server runs with short limits (1 s for the head and the body, 1 s idle) so the tests
are quick; the defaults are checked against the API server's own numbers separately.
A slowloris client (headers one byte at a time), a client that connects and says nothing
and one whose body stalls are all cut off, and while twenty of them hold connections a
good review is answered at once.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from builders.reviews import admission_review
from http_support import Served

from gangkeeper.webhook.server.limits import Limits

GOOD = json.dumps(admission_review({
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
})).encode()
SHORT = ["--header-timeout", "1", "--body-timeout", "1", "--idle-timeout", "1",
         "--max-header-bytes", "8192"]


@pytest.fixture(scope="module")
def limited(start_server: Callable[..., Served]) -> Served:
    return start_server(*SHORT)


def _connect(served: Served) -> ssl.SSLSocket:
    port = int(served.url.rsplit(":", 1)[1])
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return served.trust().wrap_socket(raw, server_hostname="localhost")


def _head(body: bytes, path: str = "/validate", length: int | None = None) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body) if length is None else length}\r\n\r\n").encode()


def _response(sock: ssl.SSLSocket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, body


def _closed_by_server(sock: ssl.SSLSocket, within: float) -> bool:
    """True when the server ends the connection (EOF or reset) within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def _good_request(served: Served) -> tuple[int, float]:
    started = time.monotonic()
    with _connect(served) as sock:
        sock.sendall(_head(GOOD) + GOOD)
        status, _, _ = _response(sock)
    return status, time.monotonic() - started


@pytest.fixture
def slowloris(limited: Served) -> Iterator[list[ssl.SSLSocket]]:
    """Twenty connections sending their headers one byte every 0.2 s until closed."""
    socks = [_connect(limited) for _ in range(20)]
    stop = threading.Event()

    def dribble(sock: ssl.SSLSocket) -> None:
        try:
            sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\n")
            while not stop.wait(0.2):
                sock.sendall(b"x")
        except OSError:
            pass  # closed by the server: what the test waits for

    threads = [threading.Thread(target=dribble, args=(s,), daemon=True) for s in socks]
    for thread in threads:
        thread.start()
    yield socks
    stop.set()
    for sock in socks:
        sock.close()


def test_a_slowloris_client_does_not_delay_a_good_review(
    limited: Served, slowloris: list[ssl.SSLSocket]
) -> None:
    status, seconds = _good_request(limited)
    assert status == 200
    assert seconds < 2.0, f"a good review waited {seconds:.1f} s behind slow clients"


def test_a_slowloris_connection_is_closed_at_the_header_deadline(
    limited: Served, slowloris: list[ssl.SSLSocket]
) -> None:
    # Every one of them dribbles past the 1 s head deadline and is cut off.
    assert all(_closed_by_server(s, within=3.0) for s in slowloris)
    assert _good_request(limited)[0] == 200


def test_a_connection_that_never_sends_a_request_is_closed(limited: Served) -> None:
    with _connect(limited) as sock:
        assert _closed_by_server(sock, within=3.0)


def test_a_stalled_body_gets_408_and_the_connection_is_closed(limited: Served) -> None:
    with _connect(limited) as sock:
        sock.sendall(_head(GOOD, length=len(GOOD) + 100) + GOOD)
        sock.settimeout(5)
        status, headers, body = _response(sock)
        assert status == 408
        assert "not received within 1 s" in json.loads(body)["error"]
        assert headers["connection"] == "close"
        assert _closed_by_server(sock, within=2.0)


def test_headers_over_the_cap_get_431(limited: Served) -> None:
    with _connect(limited) as sock:
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nx-pad: " + b"a" * 20000)
        status, headers, body = _response(sock)
    assert status == 431
    assert headers["connection"] == "close"
    assert "8192" in json.loads(body)["error"]


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(limited: Served) -> None:
    with _connect(limited) as sock:
        sock.sendall(_head(GOOD) + GOOD)
        assert _response(sock)[0] == 200
        # Kept open between requests (a second one goes through on it) ...
        sock.sendall(_head(GOOD) + GOOD)
        assert _response(sock)[0] == 200
        # ... then closed once idle for the idle timeout.
        assert _closed_by_server(sock, within=3.0)


def test_a_slow_but_steady_body_within_its_deadline_is_answered(limited: Served) -> None:
    with _connect(limited) as sock:
        sock.sendall(_head(GOOD))
        half = len(GOOD) // 2
        sock.sendall(GOOD[:half])
        time.sleep(0.3)
        sock.sendall(GOOD[half:])
        assert _response(sock)[0] == 200


def test_the_default_limits_follow_the_api_servers_numbers() -> None:
    limits = Limits()
    assert limits.max_body_bytes == 3 * 1024 * 1024  # the API server's request body cap
    assert limits.idle_timeout > 90  # outlives the API server's idle webhook connections
    assert limits.header_timeout >= 2 * 5  # webhooks' timeoutSeconds is 5
    options = limits.uvicorn_options()
    assert options["timeout_keep_alive"] == limits.idle_timeout
    assert options["limit_concurrency"] == limits.max_connections
