"""The direct transport: what it takes from a kubernetes Configuration, and how it sends.

Against a plain HTTP server on loopback that records each request.
"""

from __future__ import annotations

import http.client
import http.server
import json
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from kubernetes.client import Configuration

from gangkeeper.webhook.kube.api import ApiError
from gangkeeper.webhook.kube.direct import DirectTransport
from gangkeeper.webhook.kube.rest import Rest


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, Any]]] = []
    #: Close the connection after answering, without saying so (an idle timeout).
    drop_after_answer = False

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.seen.append({
            "method": self.command,
            "path": self.path,
            "authorization": self.headers.get("Authorization"),
            "content_type": self.headers.get("Content-Type"),
            "body": body,
            "client_port": self.client_address[1],
        })
        status = 404 if self.path.endswith("/missing") else 200
        data = json.dumps({"kind": "Status", "message": "not here"} if status == 404
                          else {"ok": True, "path": self.path}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if self.drop_after_answer:
            self.close_connection = True

    do_GET = do_PATCH = do_POST = _answer


@pytest.fixture
def server() -> Iterator[http.server.ThreadingHTTPServer]:
    Recorder.seen = []
    Recorder.drop_after_answer = False
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def configuration(host: str, token: str = "") -> Configuration:
    config = Configuration()
    config.host = host
    if token:
        config.api_key = {"authorization": token}
        config.api_key_prefix = {"authorization": "Bearer"}
    return config


def url(server: http.server.ThreadingHTTPServer, prefix: str = "") -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{prefix}"


def test_a_proxy_or_a_scheme_it_does_not_speak_keeps_the_api_client_path() -> None:
    proxied = configuration("https://10.0.0.1:6443")
    proxied.proxy = "http://proxy.example:3128"
    assert DirectTransport.from_configuration(proxied) is None
    assert DirectTransport.from_configuration(configuration("unix:///run/k8s.sock")) is None
    assert DirectTransport.from_configuration(configuration("")) is None


def test_requests_carry_the_path_prefix_token_body_and_content_type(
    server: http.server.ThreadingHTTPServer,
) -> None:
    rest = _rest(configuration(url(server, "/k8s/clusters/c-1/"), token="t0k"))
    answer = rest.request(
        "PATCH", "/api/v1/namespaces/a/pods/p", [("fieldManager", "gangkeeper")],
        body=[{"op": "remove", "path": "/spec/schedulingGates/0"}],
        content_type="application/json-patch+json",
    )
    prefixed = "/k8s/clusters/c-1/api/v1/namespaces/a/pods/p?fieldManager=gangkeeper"
    assert answer == {"ok": True, "path": prefixed}
    [seen] = Recorder.seen
    assert seen["method"] == "PATCH"
    assert seen["authorization"] == "Bearer t0k"
    assert seen["content_type"] == "application/json-patch+json"
    assert json.loads(seen["body"]) == [{"op": "remove", "path": "/spec/schedulingGates/0"}]


def test_a_refreshed_token_is_used_on_the_next_request(
    server: http.server.ThreadingHTTPServer,
) -> None:
    config = configuration(url(server), token="first")
    tokens = iter(["second", "third"])

    def refresh(cfg: Configuration) -> None:
        cfg.api_key["authorization"] = next(tokens)

    rest = _rest(config)
    config.refresh_api_key_hook = refresh
    rest.get("/api/v1/nodes")
    rest.get("/api/v1/nodes")
    assert [s["authorization"] for s in Recorder.seen] == ["Bearer second", "Bearer third"]


def test_one_connection_is_kept_alive_per_thread(
    server: http.server.ThreadingHTTPServer,
) -> None:
    rest = _rest(configuration(url(server)))
    for _ in range(3):
        rest.get("/api/v1/nodes")
    other = threading.Thread(target=rest.get, args=("/api/v1/nodes",))
    other.start()
    other.join()
    ports = [s["client_port"] for s in Recorder.seen]
    assert len(set(ports[:3])) == 1, "the same thread reuses its connection"
    assert ports[3] != ports[0], "another thread has its own"


def test_a_connection_the_server_closed_while_idle_is_reopened_once(
    server: http.server.ThreadingHTTPServer,
) -> None:
    Recorder.drop_after_answer = True
    rest = _rest(configuration(url(server)))
    assert rest.get("/api/v1/nodes")["ok"]
    assert rest.get("/api/v1/nodes")["ok"]  # first try hits the closed socket
    assert len(Recorder.seen) == 2


@pytest.mark.parametrize("error", [ssl.SSLEOFError, ssl.SSLZeroReturnError, BrokenPipeError])
def test_a_tls_connection_the_server_closed_while_idle_is_reopened_once(
    server: http.server.ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch,
    error: type[Exception],
) -> None:
    """Over TLS, writing onto a kept-alive connection the API server closed gives
    SSLEOFError, not RemoteDisconnected (bench.controller's 1,000-pod gang: the main
    thread's connection idled 2 minutes while the pool created pods)."""
    rest = _rest(configuration(url(server)))
    assert rest.get("/api/v1/nodes")["ok"]
    real = http.client.HTTPConnection.request
    failed: list[bool] = []

    def stale_once(self: http.client.HTTPConnection, *args: Any, **kwargs: Any) -> None:
        if not failed:
            failed.append(True)
            raise error(8, "EOF occurred in violation of protocol")
        real(self, *args, **kwargs)

    monkeypatch.setattr(http.client.HTTPConnection, "request", stale_once)
    assert rest.get("/api/v1/nodes")["ok"]
    assert failed and len(Recorder.seen) == 2


def test_an_error_status_is_an_api_error_with_the_servers_message(
    server: http.server.ThreadingHTTPServer,
) -> None:
    rest = _rest(configuration(url(server)))
    with pytest.raises(ApiError) as raised:
        rest.get("/api/v1/namespaces/a/pods/missing")
    assert raised.value.status == 404
    assert "not here" in str(raised.value)


def test_close_all_drops_every_connection_and_an_unreachable_server_is_status_0(
    server: http.server.ThreadingHTTPServer,
) -> None:
    port = server.server_address[1]
    rest = _rest(configuration(url(server)))
    rest.get("/api/v1/nodes")
    rest.close_all()
    rest.get("/api/v1/nodes")
    first, second = (s["client_port"] for s in Recorder.seen)
    assert first != second, "after close_all a new connection is opened"
    server.shutdown()
    server.server_close()
    gone = _rest(configuration(f"http://127.0.0.1:{port}"))
    with pytest.raises(ApiError) as refused:
        gone.get("/api/v1/nodes")
    assert refused.value.status == 0


_OPEN: list[Rest] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close_all()


def _client(config: Configuration) -> Any:
    from kubernetes.client import ApiClient

    return ApiClient(config)


def _rest(config: Configuration) -> Rest:
    rest = Rest(_client(config))
    _OPEN.append(rest)
    return rest


class Streamer(http.server.BaseHTTPRequestHandler):
    """A watch that sends one event and then nothing until released."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        line = b'{"type":"ADDED","object":{"metadata":{"name":"n"}}}\n'
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()
        self.release.wait(60)


def test_close_all_ends_a_watch_blocked_waiting_for_the_next_event() -> None:
    Streamer.release = threading.Event()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Streamer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    rest = _rest(configuration(url(httpd)))
    seen: list[Any] = []
    ended = threading.Event()

    def watch() -> None:
        try:
            for event in rest.watch("/api/v1/nodes", (), 60):
                seen.append(event)
        except Exception:  # the stream is cut: how it ends is not the point
            pass
        ended.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        for _ in range(500):
            if seen:
                break
            time.sleep(0.02)
        assert seen and seen[0]["type"] == "ADDED"
        rest.close_all()
        # The server would hold the stream for 60 s; close_all must end it now.
        assert ended.wait(10), "the watch was still blocked after close_all"
    finally:
        Streamer.release.set()
        httpd.shutdown()
        httpd.server_close()
