"""The HTTP part of `gangkeeper view`: a FastAPI app over the latest snapshot.

`create_view_app(read, token, refresh_seconds)` serves the queue (`/`), a gang
(`/gang/NS/LABEL`), the fleet (`/fleet`), the JSON each polls (`/api/state`,
`/api/gang/NS/LABEL`, `/api/fleet`) and its own stylesheet and script
(`/assets/...`). Every request must carry `token` (in the query): anything else is 403,
so another local user of the machine cannot read what the kubeconfig's owner may. The
lifespan reads the cluster once, then again every `refresh_seconds` in a background
task (in a thread: the read blocks); a failed read keeps the last snapshot and says why
on the page.

HTTP only: the pages are `pages` and their JSON `pages` and `live` (pure), the
reading `source`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from . import live, pages
from .state import STATES, ViewState

log = logging.getLogger("gangkeeper.view")

#: Sent with every answer: no framing, no token in a Referer, scripts only our own.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
ASSETS = {"view.css": "text/css", "view.js": "text/javascript"}


@dataclass
class Snapshots:
    """The latest snapshot and why the last read failed ("" when it did not)."""

    read: Callable[[], ViewState]
    state: ViewState | None = None
    error: str = ""

    def refresh(self) -> None:
        try:
            self.state = self.read()
            self.error = ""
        except Exception as exc:  # any failure of one read: keep serving the last one
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("cannot read the cluster", extra={"error": self.error})


def new_token() -> str:
    return secrets.token_urlsafe(24)


def create_view_app(
    read: Callable[[], ViewState], token: str, *, refresh_seconds: float = 5.0,
    context: str = "",
) -> FastAPI:
    snapshots = Snapshots(read)
    assets = {
        name: (resources.files(__package__) / "assets" / name).read_bytes() for name in ASSETS
    }
    refresh_ms = max(500, int(refresh_seconds * 1000))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(snapshots.refresh)

        async def again() -> None:
            while True:
                await asyncio.sleep(refresh_seconds)
                await asyncio.to_thread(snapshots.refresh)

        task = asyncio.create_task(again())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = FastAPI(title="gangkeeper view", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.snapshots = snapshots

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        given = request.query_params.get("token", "")
        if not secrets.compare_digest(given.encode(), token.encode()):
            response: Response = PlainTextResponse("403: the URL's token is missing or wrong\n",
                                                   status_code=403)
        else:
            response = await call_next(request)
        response.headers.update(HEADERS)
        return response

    def unavailable() -> Response:
        return PlainTextResponse(
            f"503: no snapshot of the cluster yet: {snapshots.error or 'reading'}\n",
            status_code=503,
        )

    @app.get("/")
    async def queue(namespace: str = "", state: str = "") -> Response:
        which = state or "all"
        if which not in STATES:
            return PlainTextResponse(
                f"400: state must be one of {', '.join(STATES)}, not {state!r}\n",
                status_code=400,
            )
        if snapshots.state is None:
            return unavailable()
        return HTMLResponse(pages.queue_page(
            snapshots.state, token, namespace=namespace, which=which, error=snapshots.error,
            refresh_ms=refresh_ms,
        ))

    @app.get("/gang/{namespace}/{label}")
    async def gang(namespace: str, label: str) -> Response:
        if snapshots.state is None:
            return unavailable()
        # explain re-runs the plan: off the event loop.
        page = await asyncio.to_thread(
            pages.gang_page, snapshots.state, (namespace, label), token, context=context,
            error=snapshots.error, refresh_ms=refresh_ms,
        )
        if page is None:
            return PlainTextResponse(f"404: no gang {namespace}/{label} now\n", status_code=404)
        return HTMLResponse(page)

    @app.get("/fleet")
    async def fleet() -> Response:
        if snapshots.state is None:
            return unavailable()
        return HTMLResponse(pages.fleet_page(snapshots.state, token, error=snapshots.error,
                                             refresh_ms=refresh_ms))

    @app.get("/api/state")
    async def api_state(namespace: str = "", state: str = "") -> Response:
        which = state or "all"
        if which not in STATES:
            return JSONResponse({"error": f"state must be one of {', '.join(STATES)}"}, 400)
        return JSONResponse(pages.state_json(snapshots.state, token, namespace, which,
                                             snapshots.error))

    def no_snapshot() -> Response:
        return JSONResponse({"generated": None, "error": snapshots.error or "reading",
                             "notes": []}, 503)

    @app.get("/api/gang/{namespace}/{label}")
    async def api_gang(namespace: str, label: str) -> Response:
        if snapshots.state is None:
            return no_snapshot()
        # explain re-runs the plan (once per snapshot): off the event loop.
        data = await asyncio.to_thread(live.gang_json, snapshots.state, (namespace, label),
                                       snapshots.error)
        if data is None:
            return JSONResponse({**pages.snapshot_json(snapshots.state, snapshots.error),
                                 "gang": None}, 404)
        return JSONResponse(data)

    @app.get("/api/fleet")
    async def api_fleet() -> Response:
        if snapshots.state is None:
            return no_snapshot()
        return JSONResponse(live.fleet_json(snapshots.state, snapshots.error))

    @app.get("/assets/{name}")
    async def asset(name: str) -> Response:
        if name not in assets:
            return PlainTextResponse("404: no such asset\n", status_code=404)
        return Response(assets[name], media_type=ASSETS[name])

    return app
