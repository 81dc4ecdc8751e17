"""Waiting for a sandbox component to become ready, and the probes that tell.

May touch: loopback HTTP(S) endpoints of the components and their log files (read
only, to quote them when a component fails).
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from .errors import SandboxError
from .pki import KeyPair
from .processes import Processes

POLL_SECONDS = 0.2


def wait_until(
    processes: Processes, component: str, ready: Callable[[], bool], deadline: float
) -> None:
    """Poll `ready` until true; fail fast when the component's process died.

    `component` starts with the process name ("kwok (nodes Ready)"): its log is quoted
    when it exits or the deadline passes.
    """
    name = component.split(" ", maxsplit=1)[0]
    log = processes.logs / (name + ".log")
    while True:
        if name in processes.names() and not processes.alive(name):
            raise SandboxError(f"{name} exited during startup; see {log}{tail(log)}")
        if ready():
            return
        if time.monotonic() > deadline:
            raise SandboxError(f"{component} not ready in time; see {log}{tail(log)}")
        time.sleep(POLL_SECONDS)


def client_context(ca: Path, client: KeyPair) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(client.cert), str(client.key))
    return ctx


def unverified_context() -> ssl.SSLContext:
    """For a component whose serving certificate is self-signed in its own directory:
    nothing to verify it against, and its health endpoint tells only that it serves."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def http_ok(url: str, tls: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0, context=tls) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False


def tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n  " + "\n  ".join(text) if text else ""
