"""Detached component processes of the sandbox, tracked by PID files.

A component is started in its own session (so Ctrl-C in the shell that ran
`gangkeeper sandbox up` does not kill the cluster), with stdout and stderr in
`<dir>/logs/<name>.log` and its PID in `<dir>/pids/<name>.pid`. Stopping reads the
PID file, so `down` works from a different process than `up`. Before signalling a
PID the command line in /proc is compared with the recorded one, so a PID the
kernel has since reused for something else is never killed.

May touch: its own `logs/` and `pids/` folders, processes it started. Nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now.

    The kernel picks it; the tiny window before the component binds it is accepted
    (ports are taken from the ephemeral range, which nothing else here listens on).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True)
class Record:
    """What was started: enough to find, check and stop it from another process."""

    name: str
    pid: int
    argv: tuple[str, ...]
    log: Path


class Processes:
    """Start, look up and stop the named component processes of one sandbox dir."""

    def __init__(self, directory: Path) -> None:
        self.logs = directory / "logs"
        self.pids = directory / "pids"
        # Popen handles of processes started by this Python process, so they are
        # reaped (no zombies in a long pytest session) when stopped.
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Record:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pids.mkdir(parents=True, exist_ok=True)
        log = self.logs / f"{name}.log"
        with log.open("ab") as out:
            out.write(f"\n=== {time.strftime('%H:%M:%S')} start: {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=dict(env) if env is not None else None,
                cwd=cwd,
            )
        self._children[name] = proc
        record = Record(name=name, pid=proc.pid, argv=tuple(argv), log=log)
        (self.pids / f"{name}.pid").write_text(
            json.dumps({"pid": record.pid, "argv": list(record.argv), "log": str(log)})
        )
        return record

    def record(self, name: str) -> Record | None:
        path = self.pids / f"{name}.pid"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return Record(
            name=name, pid=int(data["pid"]), argv=tuple(data["argv"]), log=Path(data["log"])
        )

    def names(self) -> list[str]:
        """Recorded components, most recently started first (the order to stop them)."""
        if not self.pids.is_dir():
            return []
        files = sorted(self.pids.glob("*.pid"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        return [p.stem for p in files]

    def alive(self, name: str) -> bool:
        record = self.record(name)
        return record is not None and self._running(record)

    def _running(self, record: Record) -> bool:
        proc = self._children.get(record.name)
        if proc is not None and proc.pid == record.pid:
            # Our own child: poll() is exact, and right after fork /proc still
            # shows the Python parent's command line until exec.
            return proc.poll() is None
        return _is_running(record)

    def stop(self, name: str, *, timeout: float = 10.0, kill: bool = False) -> None:
        """SIGTERM, then SIGKILL after `timeout` (at once with `kill`); forget the
        PID file either way."""
        self.stop_many([name], timeout=0.0 if kill else timeout)

    def stop_all(self, *, timeout: float = 10.0) -> None:
        self.stop_many(self.names(), timeout=timeout)

    def stop_many(self, names: list[str], *, timeout: float = 10.0) -> None:
        """Stop several at once: all get SIGTERM together, so a teardown waits for
        the slowest graceful shutdown rather than the sum of them."""
        records = [r for r in map(self.record, names) if r is not None and self._running(r)]
        for record in records:
            _signal(record.pid, signal.SIGTERM if timeout > 0 else signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while any(map(self._running, records)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for record in records:
            if self._running(record):
                _signal(record.pid, signal.SIGKILL)
        while any(map(self._running, records)):
            time.sleep(0.05)
        for name in names:
            proc = self._children.pop(name, None)
            if proc is not None and proc.poll() is None:
                # Our child although its PID file is gone (another handle stopped it
                # and it is exiting, or the file was removed): make sure, and reap it.
                proc.kill()
                proc.wait()
            (self.pids / f"{name}.pid").unlink(missing_ok=True)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _is_running(record: Record) -> bool:
    """The PID is alive, not a zombie, and still runs the recorded command."""
    proc = Path(f"/proc/{record.pid}")
    try:
        cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        stat = (proc / "stat").read_text()
    except OSError:
        return False
    # Field 3 of /proc/PID/stat is the state; Z is a zombie that only awaits reaping.
    state = stat.rsplit(")", 1)[-1].split()[0]
    if state == "Z":
        return False
    return [c.decode(errors="replace") for c in cmdline if c] == list(record.argv)
