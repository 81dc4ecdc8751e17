"""What the HTTP tests share besides fixtures: paths, example readers, a served server.

Imported by name (`from http_support import ...`) rather than from `conftest`, which
several test folders have and which is therefore ambiguous as a module name.
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

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


def wait_ready(served: Served, timeout: float = 40.0) -> None:
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
