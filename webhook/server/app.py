"""The FastAPI application: routers for admission, health and metrics, and a lifespan.

`create_app(server)` builds the app around a `Server` (config, cluster view, metrics,
TLS, background services). Routes read what they need through small provider
functions (`get_server`, `get_policy`) used as dependencies, so tests can override
them. The lifespan starts the background services (watch caches, the gang controller,
the certificate poller) and stops them on shutdown.

This module does HTTP: it reads bodies, calls `admission` (pure) and writes JSON, logs
one line per admission and updates metrics. It never decides anything itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Protocol

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import PlainTextResponse, Response

from gangkeeper.policies.admission.decision import NEVER_NAMESPACES, Memos
from gangkeeper.policies.errors import OwnerNotCached
from gangkeeper.policies.settings.config import Config

from . import admission
from .admission import Policy
from .cluster_view import ClusterView
from .limits import Limits, client_cert_name
from .metrics import Metrics
from .tls import ReloadingTLS

log = logging.getLogger("gangkeeper.admission")


class Service(Protocol):
    """Background work the app runs for its lifetime (watches, controller)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class Server:
    """Everything a request needs, built once by `gangkeeper serve` (or a test)."""

    config: Config
    view: ClusterView
    metrics: Metrics = field(default_factory=Metrics)
    tls: ReloadingTLS | None = None
    services: Sequence[Service] = ()
    #: Where the expiry metric reads notAfter from (the serving certificate).
    cert_file: Path | None = None
    #: Body size and deadline (enforced here); the connection limits are uvicorn's.
    limits: Limits = field(default_factory=Limits)
    #: `serve --client-ca`: /mutate and /validate answer only a client whose certificate
    #: the TLS handshake verified against that CA (401 otherwise).
    require_client_cert: bool = False
    cert_poll_seconds: float = 2.0
    #: Serve the admission endpoints (off in `serve --controller-only`).
    admission: bool = True
    #: Expose `POST /noop` (the benchmark's floor); never on in production.
    noop: bool = False
    #: gangkeeper's own namespace: never gang-keyed or validated (with kube-system).
    namespace: str = ""
    #: Extra readiness checks: name → callable returning True when ready.
    readiness: dict[str, Callable[[], bool]] = field(default_factory=dict)
    #: What this server's decisions remember (plans per pod shape, owners' gangs).
    memos: Memos = field(default_factory=Memos)

    @property
    def skip_namespaces(self) -> frozenset[str]:
        own = {self.namespace} if self.namespace else set()
        return NEVER_NAMESPACES | own

    def policy(self, *, fetch: bool = False) -> Policy:
        """What one admission decides with: the cluster view's state as of now. Owners
        come from the watch caches alone unless `fetch` (a view that can fetch one it
        lacks raises `OwnerNotCached` instead: see `_admit`)."""
        view = self.view
        lookup = view.lookup if fetch else getattr(view, "cached", view.lookup)
        devices = getattr(view, "devices", None)
        if devices is not None:
            lookup = devices.owners(lookup)
        return Policy(
            capacity=view.capacity, lookup=lookup, config=self.config,
            memos=self.memos, skip_namespaces=self.skip_namespaces, siblings=view.siblings,
            owners_hint=getattr(view, "owners_hint", ""),
            devices=devices,
        )

    def not_ready(self) -> list[str]:
        waiting = []
        if not self.view.synced:
            waiting.append("cluster caches not synced")
        if self.admission and self.tls is None:
            waiting.append("serving certificate not loaded")
        waiting.extend(name for name, ready in self.readiness.items() if not ready())
        return waiting

    def update_certificate_expiry(self) -> None:
        if self.cert_file is None:
            return
        try:
            from gangkeeper.certs import certificate_not_after

            self.metrics.set_certificate_expiry(certificate_not_after(self.cert_file).timestamp())
        except Exception as exc:  # a metric must never stop the server
            log.warning("cannot read certificate expiry", extra={"error": str(exc)})


# --- providers (overridable dependencies) ---------------------------------------------


# The providers are `async def` although they never wait: FastAPI runs a plain `def`
# dependency in a worker thread, and that hop cost more than the whole no-op answer.


async def get_server(request: Request) -> Server:
    server: Server = request.app.state.server
    return server


async def get_policy(server: Annotated[Server, Depends(get_server)]) -> admission.Policy:
    return server.policy()


ServerDep = Annotated[Server, Depends(get_server)]
PolicyDep = Annotated[admission.Policy, Depends(get_policy)]


# --- admission -----------------------------------------------------------------------


async def _read_body(request: Request, limits: Limits) -> bytes:
    """The body, refused once it passes the size cap (413) or its deadline (408)."""
    limit = limits.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise admission.BadReview(413, f"body of {declared} bytes is over the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.body_timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise admission.BadReview(413, f"body is over the limit of {limit} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise admission.BadReview(
            408, f"body not received within {limits.body_timeout:g} s ({size} bytes so far)"
        ) from None
    return b"".join(chunks)


#: Refusals after which the rest of the body may still be on its way (or never come):
#: the connection cannot carry another request, so it is closed after the answer.
_CLOSE_AFTER = frozenset({401, 408, 413})


def _json(data: Any, status: int = 200) -> Response:
    try:
        body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        # A lone surrogate (`"\ud800"` is valid JSON) echoed back has no UTF-8 form;
        # escaped, the answer is still JSON and still names what was sent.
        body = json.dumps(data, separators=(",", ":")).encode()
    headers = {"connection": "close"} if status in _CLOSE_AFTER else None
    return Response(body, status_code=status, media_type="application/json", headers=headers)


async def _admit(
    endpoint: admission.Endpoint, request: Request, server: Server, policy: admission.Policy
) -> Response:
    started = time.perf_counter()
    try:
        if server.require_client_cert and client_cert_name(request.scope) is None:
            raise admission.BadReview(
                401, "a client certificate signed by the --client-ca is required"
            )
        body = await _read_body(request, server.limits)
        review = admission.parse_review(body, max_bytes=server.limits.max_body_bytes)
    except admission.BadReview as bad:
        server.metrics.observe_admission(
            endpoint, "error", "bad-request", time.perf_counter() - started
        )
        log.warning(
            "admission request refused",
            extra={"endpoint": endpoint, "status": bad.status, "error": bad.message},
        )
        return _json({"error": bad.message}, bad.status)
    try:
        answer = admission.answer(endpoint, review, policy)
    except OwnerNotCached:
        # An owner the watch caches do not hold yet (a Job's first pods can race its
        # watch event): the GET, bounded by the view's MISS_TIMEOUT_SECONDS, runs in a
        # worker thread, so the event loop goes on answering every other admission.
        server.metrics.count_owner_fetch()
        answer = await asyncio.to_thread(
            admission.answer, endpoint, review, server.policy(fetch=True)
        )
    elapsed = time.perf_counter() - started
    try:
        _record(server, endpoint, answer, elapsed)
    except Exception:  # bookkeeping must never turn an answer into a 500
        log.exception("cannot record admission", extra={"uid": review.uid})
    return _json(answer.review)


def _record(
    server: Server, endpoint: admission.Endpoint, answer: admission.Answer, elapsed: float
) -> None:
    server.metrics.observe_admission(
        endpoint, answer.verdict, answer.outcome, elapsed, answer.reason
    )
    extra = {
        **answer.summary,
        "allowed": answer.allowed,
        "outcome": answer.outcome,
        "duration_ms": round(elapsed * 1000, 3),
    }
    if answer.exception is not None:
        exc = answer.exception
        log.error("admission policy failed", extra=extra,
                  exc_info=(type(exc), exc, exc.__traceback__))
    else:
        log.info("admission", extra=extra)


def admission_paths(*, noop: bool) -> dict[str, admission.Endpoint]:
    """The admission URLs and the endpoint each answers: the one table both the routes
    and `AdmissionFastPath` dispatch from. `/noop` only for the benchmark's floor."""
    paths: dict[str, admission.Endpoint] = {"/mutate": "mutate", "/validate": "validate"}
    if noop:
        paths["/noop"] = "noop"
    return paths


def _route(endpoint: admission.Endpoint) -> Callable[..., Awaitable[Response]]:
    async def admit(request: Request, server: ServerDep, policy: PolicyDep) -> Response:
        return await _admit(endpoint, request, server, policy)

    admit.__name__ = endpoint
    return admit


def admission_router(*, noop: bool) -> APIRouter:
    router = APIRouter(tags=["admission"])
    for path, endpoint in admission_paths(noop=noop).items():
        router.add_api_route(path, _route(endpoint), methods=["POST"],
                             include_in_schema=endpoint != "noop")
    return router


# --- health and metrics --------------------------------------------------------------


def health_router() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz", response_class=PlainTextResponse)
    async def healthz() -> str:
        return "ok\n"

    @router.get("/readyz")
    async def readyz(server: ServerDep) -> Response:
        waiting = server.not_ready()
        if waiting:
            return _json({"ready": False, "waiting": waiting}, 503)
        return _json({"ready": True})

    return router


def metrics_router() -> APIRouter:
    router = APIRouter(tags=["metrics"])

    @router.get("/metrics")
    async def metrics(server: ServerDep) -> Response:
        return Response(
            server.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    return router


# --- lifespan ------------------------------------------------------------------------


async def _poll_certificate(server: Server) -> None:
    tls = server.tls
    assert tls is not None
    while True:
        await asyncio.sleep(server.cert_poll_seconds)
        try:
            if tls.poll():
                server.metrics.count_certificate_reload()
                server.update_certificate_expiry()
        except Exception as exc:  # keep polling: the next renewal must still be seen
            log.warning("certificate poll failed", extra={"error": str(exc)})


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    server: Server = app.state.server
    server.update_certificate_expiry()
    # Everything allocated so far (modules, the app, caches listed at start) lives for
    # the whole process; moving it out of the collector's generations keeps each
    # collection triggered by per-request garbage from re-scanning it.
    gc.freeze()
    started: list[Service] = []
    poller: asyncio.Task[None] | None = None
    try:
        for service in server.services:
            service.start()
            started.append(service)
        if server.tls is not None:
            poller = asyncio.create_task(_poll_certificate(server))
        yield
    finally:
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        for service in reversed(started):
            try:
                service.stop()
            except Exception as exc:  # stop the others regardless
                log.warning("service did not stop cleanly",
                            extra={"service": type(service).__name__, "error": str(exc)})


class AdmissionFastPath:
    """ASGI middleware: POST /mutate and /validate (and /noop) go straight to `_admit`.

    FastAPI's routing, dependency solving and exception layers cost about as much CPU
    per admission as the policy itself, and every millisecond here is added to a pod
    create. The answer is the same `_admit` the routes call (same body limit, metrics,
    log line); only the dispatch is skipped. While a test overrides a provider
    (`app.dependency_overrides`), requests take the routed path so the override holds.
    """

    def __init__(self, app: Any, fastapi_app: FastAPI, server: Server) -> None:
        self._next = app
        self._fastapi = fastapi_app
        self._server = server
        # The benchmark's floor (/noop) takes the same dispatch as what it is compared to.
        self._paths = admission_paths(noop=server.noop)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        endpoint = self._paths.get(scope.get("path", "")) if scope["type"] == "http" else None
        if (
            endpoint is None
            or scope.get("method") != "POST"
            or self._fastapi.dependency_overrides
        ):
            await self._next(scope, receive, send)
            return
        server = self._server
        response = await _admit(endpoint, Request(scope, receive), server, server.policy())
        await response(scope, receive, send)


def create_app(server: Server) -> FastAPI:
    app = FastAPI(
        title="gangkeeper",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.server = server
    if server.admission:
        app.include_router(admission_router(noop=server.noop))
        app.add_middleware(AdmissionFastPath, fastapi_app=app, server=server)
    app.include_router(health_router())
    app.include_router(metrics_router())
    return app
