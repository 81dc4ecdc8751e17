"""Fixtures for the HTTP tests: a real `gangkeeper serve` process over real TLS.

`served` (session) starts `python -m gangkeeper.webhook.cli serve` on a free loopback
port with `--nodes examples/fleet.yaml`, every example manifest (plus the objects a
controller would create in between, see `http_workloads.children_for`) as owners, and
certificates issued into a temporary directory; it waits for /readyz. `client` is an
httpx client trusting that CA. `start_server` starts further servers for tests that
need their own (certificate renewal).
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from http_workloads import children_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FLEET = EXAMPLES / "fleet.yaml"


def example_files() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.yaml") if p.name != "fleet.yaml")


def example_documents(path: Path) -> list[dict[str, object]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Served:
    url: str
    cert_dir: Path
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def ca(self) -> Path:
        return self.cert_dir / "ca.crt"

    def trust(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


def _wait_ready(served: Served, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            break
        try:
            if served.ca.is_file():
                response = httpx.get(f"{served.url}/readyz", verify=served.trust(), timeout=2)
                if response.status_code == 200:
                    return
                last = response.text
        except httpx.HTTPError as exc:
            last = str(exc)
        time.sleep(0.2)
    served.process.kill()
    raise AssertionError(
        f"gangkeeper serve never became ready ({last}); log:\n{served.log.read_text()[-4000:]}"
    )


@pytest.fixture(scope="session")
def start_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(*extra: str, cert_dir: Path | None = None, env: dict[str, str] | None = None
              ) -> Served:
        work = tmp_path_factory.mktemp("serve")
        owners = work / "owners.yaml"
        docs = [doc for path in example_files() for doc in example_documents(path)]
        docs += [child for doc in docs for child in children_for(doc)]
        owners.write_text(yaml.safe_dump_all(docs))
        port = free_port()
        cert_dir = cert_dir or work / "certs"
        log = work / "serve.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "gangkeeper.webhook.cli", "serve",
                 "--nodes", str(FLEET), "--owners", str(owners),
                 "--host", "127.0.0.1", "--port", str(port), "--cert-dir", str(cert_dir),
                 *extra],
                stdout=out, stderr=subprocess.STDOUT, cwd=work,
                env={**os.environ, **(env or {})},
            )
        served = Served(f"https://127.0.0.1:{port}", cert_dir, log, process)
        started.append(served)
        _wait_ready(served)
        return served

    yield start
    for served in started:
        served.process.terminate()
        try:
            served.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            served.process.kill()
            served.process.wait()


@pytest.fixture(scope="session")
def served(start_server: Callable[..., Served]) -> Served:
    return start_server()


@pytest.fixture
def client(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, verify=served.trust(), timeout=10) as http:
        yield http
