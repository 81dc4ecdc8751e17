"""A thin JSON client over the kubernetes `ApiClient`: plain dicts in and out.

The generated API classes turn every object into typed models, which costs about a
millisecond per pod: too slow for a 1,000-pod gang and useless to the pure code,
which reads dicts. `Rest` reuses the `ApiClient`'s configuration (host, TLS, token
refresh), sends JSON, and returns parsed JSON: plain requests on direct.py's
per-thread connections when the configuration allows, else through the ApiClient.
`watch` yields watch events line by line. Errors become `ApiError` with the HTTP
status. `Rest` is the real `Api` (api.py); `FakeApi` (fake.py) the one tests use.

I/O only: no decisions here.
"""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any, cast

import urllib3.exceptions
from kubernetes.client import ApiClient

from .api import Api, ApiError, Call, Query, Timeout
from .direct import DirectTransport

#: What a request that ran out of time raises: the socket's, or urllib3's (also as the
#: reason of a MaxRetryError).
_TIMEOUTS = (TimeoutError, urllib3.exceptions.TimeoutError)


def _unreachable(exc: Exception) -> ApiError:
    """The ApiError (status 0) for a request that got no answer: a `Timeout` if it timed out."""
    reason = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, _TIMEOUTS) or isinstance(getattr(exc, "reason", None), _TIMEOUTS):
        return Timeout(0, reason)
    return ApiError(0, reason)


class Rest(Api):
    """JSON requests against the cluster an `ApiClient` is configured for (an `Api`)."""

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client
        # Plain requests take the leaner direct path when the configuration allows it
        # (direct.py); watches always stream through the ApiClient.
        self._direct = DirectTransport.from_configuration(api_client.configuration)
        self._streams: set[Any] = set()
        self._streams_lock = threading.Lock()

    def _send(self, call: Call, timeout: float | tuple[float, float] | None) -> Any:
        """The call through the ApiClient (urllib3): its raw response."""
        headers = {"Accept": "application/json", "Content-Type": call.content_type}
        try:
            _, url, headers, body, _ = self.api_client.param_serialize(
                method=call.method,
                resource_path=call.path,
                query_params=list(call.query),
                header_params=headers,
                body=call.body,
                auth_settings=["BearerToken"],
            )
            return self.api_client.call_api(
                call.method, url, header_params=headers, body=body, _request_timeout=timeout
            )
        except ApiError:
            raise
        except Exception as exc:  # urllib3/ssl errors: the API is unreachable now
            raise _unreachable(exc) from exc

    def send(self, call: Call) -> dict[str, Any]:
        if self._direct is not None:
            query = list(call.query)
            target = call.path + ("?" + urllib.parse.urlencode(query) if query else "")
            body = call.body
            payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
            try:
                answer = self._direct.request(
                    call.method, target, payload, content_type=call.content_type,
                    timeout=call.timeout,
                )
            except Exception as exc:  # socket/ssl errors: the API is unreachable now
                raise _unreachable(exc) from exc
            status, reason, data = answer.status, answer.reason, answer.body
        else:
            response = self._send(call, call.timeout)
            status, reason, data = response.status, str(response.reason), response.read()
        if not 200 <= status < 300:
            raise ApiError(status, reason, data.decode(errors="replace"))
        if not data:
            return {}
        return cast(dict[str, Any], json.loads(data))

    def watch(
        self, path: str, query: Query, timeout_seconds: int
    ) -> Iterator[Mapping[str, Any]]:
        """Watch events of one request; ends when the server closes the stream."""
        params = [*query, ("watch", "true"), ("timeoutSeconds", timeout_seconds),
                  ("allowWatchBookmarks", "true")]
        for line in self.stream_lines(path, params, timeout=(10.0, timeout_seconds + 30.0)):
            yield cast(Mapping[str, Any], json.loads(line))

    def stream_lines(
        self, path: str, query: Query, *, timeout: float | tuple[float, float]
    ) -> Iterator[bytes]:
        """The non-empty lines of a streamed GET (a watch), as the server sends them."""
        response = self._send(Call("GET", path, tuple(query)), timeout)
        if not 200 <= response.status < 300:
            data = response.read()
            raise ApiError(response.status, str(response.reason), data.decode(errors="replace"))
        raw = response.response
        with self._streams_lock:
            self._streams.add(raw)
        try:
            pending = b""
            for chunk in raw.stream(amt=None, decode_content=False):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                yield from (line for line in lines if line.strip())
            if pending.strip():
                yield pending
        finally:
            with self._streams_lock:
                self._streams.discard(raw)
            raw.release_conn()

    def close_all(self) -> None:
        """End every open watch stream at once, drop pooled connections and the client.

        A watch thread blocks in a socket read until the server sends a line; shutting
        its socket down ends the read now, so stopping takes milliseconds rather than
        the join timeouts (seconds) of every watch.
        """
        with self._streams_lock:
            streams = list(self._streams)
        for raw in streams:
            shutdown = getattr(raw, "shutdown", None)  # urllib3 >= 2.3
            if shutdown is not None:
                with contextlib.suppress(OSError):  # already closed
                    shutdown()
        if self._direct is not None:
            self._direct.close_all()
        pool = getattr(self.api_client.rest_client, "pool_manager", None)
        if pool is not None:
            pool.clear()
        self.api_client.close()  # type: ignore[no-untyped-call]
