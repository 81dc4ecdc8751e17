"""Faults the end-to-end tests inflict on a running sandbox: more gangkeeper replicas,
signals to a component (SIGSTOP/SIGCONT/SIGKILL), a component restarted with the
command line it was started with, and an etcd compaction.

May touch: the sandbox's processes (through its `Processes`: only those it started),
their PID and log files, and etcd's v3 HTTP/JSON gateway on the client port
(`POST /v3/kv/range`, `/v3/kv/compaction`): etcdctl is not built.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from .errors import SandboxError
from .processes import free_port
from .waiting import http_ok, wait_until

if TYPE_CHECKING:
    from .sandbox import Sandbox

#: How long a restarted component may take to answer its health endpoint.
RESTART_SECONDS = 90.0


class Faults:
    """Fault injection on one running sandbox (see the module docstring)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.processes = sandbox.processes

    # -- gangkeeper replicas -------------------------------------------------------------

    def start_replica(
        self, name: str, *, env: Mapping[str, str] | None = None, port: int | None = None
    ) -> str:
        """Another `gangkeeper serve` running admission and the controller in one
        process (same certificates, config and identity; its own port and process
        identity, so the same Lease) named `name`; its URL once /readyz answers. Not
        registered: the API server calls the sandbox's own."""
        state = self.sandbox.state()
        argv = [a for a in state.get("gangkeeper_argv") or [] if a != "--no-controller"]
        if not argv:
            raise SandboxError("this sandbox runs no gangkeeper to replicate")
        port = port or free_port()
        argv[argv.index("--port") + 1] = str(port)
        url = f"https://127.0.0.1:{port}"
        self.processes.start(
            name, argv, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        )
        tls = ssl.create_default_context(cafile=str(self.sandbox.gangkeeper_cert_dir / "ca.crt"))
        wait_until(
            self.processes, name, lambda: http_ok(f"{url}/readyz", tls),
            time.monotonic() + RESTART_SECONDS,
        )
        return url

    # -- signals and restarts --------------------------------------------------------------

    def pid(self, name: str) -> int:
        record = self.processes.record(name)
        if record is None or not self.processes.alive(name):
            raise SandboxError(f"no running sandbox component {name!r}")
        return record.pid

    def signal(self, name: str, sig: signal.Signals) -> None:
        os.kill(self.pid(name), sig)

    def restart(
        self, name: str, *, down_seconds: float = 0.0, kill: bool = False,
        while_down: Callable[[], object] = lambda: None,
    ) -> None:
        """Stop `name` (SIGTERM; SIGKILL with `kill`: a crash), keep it down
        `down_seconds` (running `while_down`), start it again with its recorded
        command line, and wait until it answers."""
        record = self.processes.record(name)
        if record is None:
            raise SandboxError(f"no sandbox component {name!r} recorded")
        self.processes.stop(name, kill=kill)
        while_down()
        time.sleep(down_seconds)
        self.processes.start(name, record.argv)
        wait_until(self.processes, name, lambda: self.healthy(name),
                   time.monotonic() + RESTART_SECONDS)

    def healthy(self, name: str) -> bool:
        if name == "etcd":
            return http_ok(f"{self._etcd}/health", None)
        if name == "kube-apiserver":
            done = self.sandbox.cli.run("get", "--raw", "/readyz", check=False)
            return done.returncode == 0
        return self.processes.alive(name)

    # -- etcd ------------------------------------------------------------------------------

    @property
    def _etcd(self) -> str:
        return f"http://127.0.0.1:{self.sandbox.state()['ports']['etcd_client']}"

    def _gateway(self, path: str, body: Mapping[str, object]) -> dict[str, object]:
        request = urllib.request.Request(
            f"{self._etcd}{path}", data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            parsed: dict[str, object] = json.loads(answer.read())
        return parsed

    def revision(self) -> int:
        """etcd's current revision (a range read of one key returns it in the header)."""
        answer = self._gateway("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})
        header = answer.get("header")
        assert isinstance(header, dict)
        return int(header["revision"])

    def compact(self) -> int:
        """Compact etcd's history up to now (physically): every older revision is gone,
        so a watch or list from a version before it gets 410 Gone. Returns it."""
        revision = self.revision()
        self._gateway("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision
