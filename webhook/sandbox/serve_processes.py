"""gangkeeper's own processes in a sandbox: their command lines, start and stop.

Admission (`gangkeeper`, `serve --no-controller`) and the gang controller
(`gangkeeper-controller`, `serve --controller-only`) run as two processes, the way the
shipped Deployments run them, or as one `serve` in single-process mode. Their command
lines and URLs are recorded in the sandbox's state (`serve_state`), so any process can
restart them later (`start`) or stop them (`stop`).

May touch: the processes it starts (through `Processes`, PID files in the sandbox
directory) and their loopback /readyz endpoints. Never another address than 127.0.0.1.
"""

from __future__ import annotations

import functools
import os
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import registration
from .control_plane import Ports
from .errors import SandboxError
from .processes import Processes
from .waiting import http_ok, wait_until

#: The sandbox's process running `serve --controller-only` (beside `gangkeeper`).
CONTROLLER_PROCESS = "gangkeeper-controller"
#: Both names, admission first: what `stop` stops.
NAMES = ("gangkeeper", CONTROLLER_PROCESS)


def serve_state(
    ports: Ports, *, kubeconfig: Path, cert_dir: Path, config: Path | None, single_process: bool
) -> dict[str, Any]:
    """The command lines and URLs of gangkeeper's processes, as the state records them."""
    argv = functools.partial(
        registration.serve_argv, kubeconfig=kubeconfig, cert_dir=cert_dir, config=config
    )
    url = f"https://127.0.0.1:{ports.gangkeeper}"
    if single_process:
        return {"gangkeeper_url": url, "gangkeeper_argv": argv(port=ports.gangkeeper)}
    # As the shipped Deployments: the controller never runs in the process that
    # answers the API server. Both read the same certificate files.
    return {
        "gangkeeper_url": url,
        "gangkeeper_argv": argv(port=ports.gangkeeper, mode="--no-controller"),
        "gangkeeper_controller_url": f"https://127.0.0.1:{ports.gangkeeper_controller}",
        "gangkeeper_controller_argv": argv(
            port=ports.gangkeeper_controller, mode="--controller-only"
        ),
    }


def controller_process(state: Mapping[str, Any]) -> str:
    """The process that runs the gang controller (and holds the Lease when it leads)."""
    return CONTROLLER_PROCESS if state.get("gangkeeper_controller_argv") else "gangkeeper"


def controller_url(state: Mapping[str, Any]) -> str:
    """Where the gang controller's /metrics are."""
    return str(state.get("gangkeeper_controller_url") or state["gangkeeper_url"])


def start(
    processes: Processes,
    state: Mapping[str, Any],
    *,
    cert_dir: Path,
    deadline: float | None,
    extra_args: Sequence[str],
    log: Callable[[str], None],
    state_file: Path,
) -> None:
    """(Re)start the recorded processes not running (admission first), each with
    `extra_args` for this run only; wait for each one's /readyz."""
    argv = state.get("gangkeeper_argv")
    if not argv:
        raise SandboxError(f"no gangkeeper recorded in {state_file}")
    deadline = deadline or time.monotonic() + 60.0
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    tls = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    started = [("gangkeeper", argv, state["gangkeeper_url"])]
    if state.get("gangkeeper_controller_argv"):
        started.append((CONTROLLER_PROCESS, state["gangkeeper_controller_argv"],
                        state["gangkeeper_controller_url"]))
    for name, command, base in started:
        if processes.alive(name):
            continue
        what = "controller" if name == CONTROLLER_PROCESS else "serve"
        log(f"starting gangkeeper {what} on {base}")
        processes.start(name, [*command, *extra_args], env=env)
        wait_until(processes, name, functools.partial(http_ok, f"{base}/readyz", tls), deadline)


def stop(processes: Processes, *, kill: bool = False) -> None:
    """SIGTERM (graceful) or, with `kill`, SIGKILL: a crash, nothing cleaned up."""
    processes.stop_many(list(NAMES), timeout=0.0 if kill else 10.0)
