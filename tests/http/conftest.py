"""Fixtures for the HTTP tests: a real `gangkeeper serve` process over real TLS.

`served` (session) starts `python -m gangkeeper.webhook.cli serve` on a free loopback
port with `--nodes examples/fleet.yaml`, every example manifest (plus the objects a
controller would create in between, see `builders.reviews.children_for`) as owners, and
certificates issued into a temporary directory; it waits for /readyz. `client` is an
httpx client trusting that CA. `start_server` starts further servers for tests that
need their own (certificate renewal).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from builders.reviews import children_for
from http_support import FLEET, Served, example_documents, example_files, free_port, wait_ready


@pytest.fixture(scope="session")
def start_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(
        *extra: str, cert_dir: Path | None = None, env: dict[str, str] | None = None
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
                [
                    sys.executable,
                    "-m",
                    "gangkeeper.webhook.cli",
                    "serve",
                    "--nodes",
                    str(FLEET),
                    "--owners",
                    str(owners),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--cert-dir",
                    str(cert_dir),
                    *extra,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=work,
                env={**os.environ, **(env or {})},
            )
        served = Served(f"https://127.0.0.1:{port}", cert_dir, log, process)
        started.append(served)
        wait_ready(served)
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
