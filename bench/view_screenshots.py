"""`python -m bench.view_screenshots [--out docs/view]`: a picture of each page of
`gangkeeper view` (queue.png, gang.png, fleet.png), taken by headless Chromium.

The pages are served exactly as `gangkeeper view` serves them (`LoopbackView`: the
app on a loopback port, in a thread, reading a `FakeApi` cluster), for a small demo
cluster (`bench.view.synthetic`). Needs Debian's chromium and chromium-driver and
selenium: `tests/support/chromium.sh` installs them. `LoopbackView` and `chrome` are
also what tests/http/test_view_browser.py drives.

Starts a loopback server and a browser in this process; writes only the PNGs.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn

from bench.view import EPOCH, RACK, synthetic
from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.view.server import create_view_app
from gangkeeper.webhook.view.source import reader

PODS, NODES = "/api/v1/pods", "/api/v1/nodes"
#: What `chrome` needs on PATH, and what installs it.
BROWSER, DRIVER = "chromium", "chromedriver"
INSTALL = "tests/support/chromium.sh"


def fake_api(pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]) -> FakeApi:
    api = FakeApi()
    api.seed(PODS, *pods)
    api.seed(NODES, *nodes)
    return api


class LoopbackView:
    """`gangkeeper view`'s app served on 127.0.0.1 (a free port) in a thread; the
    context gives the URL with its token."""

    def __init__(self, api: FakeApi, config: Config | None = None, *,
                 refresh_seconds: float = 0.2, clock: Callable[[], float] = time.time) -> None:
        self.token = secrets.token_urlsafe(24)
        self._app = create_view_app(reader(api, config or Config(), clock=clock), self.token,
                                    refresh_seconds=refresh_seconds)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server = uvicorn.Server(uvicorn.Config(self._app, log_level="warning"))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.base = ""

    def _serve(self) -> None:
        self._server.run(sockets=[self._sock])

    def url(self, path: str = "/", **params: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in {"token": self.token, **params}.items())
        return f"{self.base}{path}?{query}"

    def __enter__(self) -> LoopbackView:
        self._sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the view server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


def missing() -> str:
    """Why `chrome` cannot start here ("" when it can)."""
    absent = [name for name in (BROWSER, DRIVER) if shutil.which(name) is None]
    try:
        import selenium  # noqa: F401
    except ImportError:
        absent.append("selenium")
    return f"{', '.join(absent)} not installed (run {INSTALL})" if absent else ""


def chrome(width: int = 1400, height: int = 1000) -> Any:
    """Headless Chromium under chromedriver, both Debian's (nothing is downloaded)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which(BROWSER) or BROWSER
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                 "--disable-gpu", f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(shutil.which(DRIVER) or DRIVER))


def demo() -> tuple[FakeApi, Config, float]:
    """A small cluster with gangs running, waiting and held, and a cordoned node."""
    pods, nodes = synthetic(14, 12, running=0.5, rack_size=4)
    return fake_api(pods, nodes), load_config({"topology": [RACK]}), EPOCH + 200


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.view_screenshots",
                                     description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/view"))
    args = parser.parse_args(argv)
    why = missing()
    if why:
        print(f"bench.view_screenshots: {why}")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    api, config, now = demo()
    with LoopbackView(api, config, clock=lambda: now) as view:
        driver = chrome()
        try:
            waiting = "/gang/team-4/job-0009"
            for name, path, height in (("queue", "/", 900), ("gang", waiting, 1500),
                                       ("fleet", "/fleet", 1100)):
                driver.set_window_size(1400, height)
                driver.get(view.url(path))
                target = args.out / f"{name}.png"
                driver.save_screenshot(str(target))
                print(f"wrote {target}")
        finally:
            driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
