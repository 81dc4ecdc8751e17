"""The built image does what the deploy manifests and the README say: `podman run IMAGE
ARGS` is `gangkeeper ARGS`, `check` judges the shipped examples, and the default command
serves /readyz over TLS as UID 65532 on a read-only root filesystem.

The image is the one `deploy/image/build.sh` builds (`GANGKEEPER_IMAGE_REF`, default
`localhost/gangkeeper:<version>`); without podman or that image these tests skip, and
`GANGKEEPER_IMAGE=require` (what `build.sh --check` sets) turns the skip into a failure.
Runs podman and nothing else, no cluster: one server with `--network=host`, reached on
the host's loopback; the default command in a network namespace of its own
(`--network=none`), asked from inside the container.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from builders.image import ENV, REPO, built_image, podman


@pytest.fixture(scope="module")
def image() -> str:
    return built_image()


def podman_run(image: str, *args: str) -> subprocess.CompletedProcess[str]:
    return podman("run", "--rm", "--read-only", image, *args)


def test_the_image_runs_gangkeeper_with_the_arguments_given(image: str) -> None:
    # The entrypoint is `gangkeeper` (not `gangkeeper serve`): the arguments pick the command.
    done = podman_run(image, "check", "--help")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("usage: gangkeeper check"), done.stdout


def test_the_images_version_is_the_projects(image: str) -> None:
    version = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert version
    done = podman_run(image, "--version")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"gangkeeper {version[1]}\n", done.stdout


@pytest.mark.parametrize(("example", "code"), [("job-fits.yaml", 0), ("job-too-big.yaml", 1)])
def test_check_in_the_image_judges_the_shipped_examples(image: str, example: str,
                                                        code: int) -> None:
    done = podman_run(image, "check", "--nodes", "examples/fleet.yaml", "-f",
                      f"examples/{example}")
    assert done.returncode == code, done.stdout + done.stderr
    assert ("admit" if code == 0 else "reject") in done.stdout


def test_the_image_holds_no_compiler_no_pip_and_no_pip_cache(image: str) -> None:
    probe = ("import importlib.util, os, shutil; print(sorted(t for t in ('gcc', 'cc', "
             "'c++', 'pip', 'pip3') if shutil.which(t)), importlib.util.find_spec('pip') is "
             "not None, [d for d in ('/root/.cache/pip', '/tmp/pip') if os.path.exists(d)])")
    done = podman("run", "--rm", "--user", "0", "--entrypoint", "python3", image, "-c", probe)
    assert done.stdout.split("\n")[0] == "[] False []", done.stdout + done.stderr


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


#: /readyz over TLS from inside the container; the certificate is the one the server
#: issued itself, so it is not verified here (the wheel's tests check the issued chain).
READYZ = """
import ssl, sys, urllib.request
context = ssl._create_unverified_context()
url = f"https://127.0.0.1:{sys.argv[1]}/readyz"
with urllib.request.urlopen(url, context=context, timeout=2) as response:
    print(response.status, response.read().decode())
"""


def _readyz_from_host(port: int) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context,
                                    timeout=2) as response:
            return f"{response.status} {response.read().decode()}"
    except (OSError, urllib.error.URLError) as exc:
        return str(exc)


def _readyz_from_inside(name: str, port: int) -> str:
    done = podman("exec", name, "python3", "-c", READYZ, str(port))
    return done.stdout.strip() or done.stderr.strip()[-300:]


@dataclass
class Served:
    name: str
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait_ready(self, readyz: Callable[[], str]) -> None:
        deadline = time.monotonic() + 90
        last = ""
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                last = f"the container exited ({self.process.returncode})"
                break
            last = readyz()
            if last.startswith("200 "):
                return
            time.sleep(0.5)
        pytest.fail(f"serve in the image never answered /readyz on port {self.port}: "
                    f"{last}\n{self.log_tail()}")

    def ids(self) -> list[str]:
        done = podman("exec", self.name, "python3", "-c",
                      "import os; print(os.getuid(), os.getgid())")
        return done.stdout.split() or [done.stderr]


@contextlib.contextmanager
def serving(image: str, log: Path, port: int, *args: str) -> Iterator[Served]:
    """`podman run --read-only [ARGS]` in the foreground, stopped afterwards."""
    this = Served(f"gangkeeper-image-test-{os.getpid()}-{port}", port, log)
    with log.open("w") as out:
        this.process = subprocess.Popen(["podman", "run", "--rm", "--read-only", "--name",
                                         this.name, *args], stdout=out,
                                        stderr=subprocess.STDOUT, env=ENV)
    try:
        yield this
    finally:
        podman("stop", "--time", "5", this.name)
        this.process.wait(timeout=60)


def test_serve_answers_readyz_over_tls_on_the_hosts_loopback_from_a_read_only_root(
    image: str, tmp_path: Path
) -> None:
    port = _free_port()
    with serving(image, tmp_path / "serve.log", port, "--network=host", image, "serve",
                 "--host", "127.0.0.1", "--port", str(port),
                 "--cert-dir", "/tmp/gangkeeper/certs") as served:
        served.wait_ready(lambda: _readyz_from_host(port))
        assert served.ids() == ["65532", "65532"]


def test_the_default_command_serves_the_packaged_fleet_on_a_read_only_root(
    image: str, tmp_path: Path
) -> None:
    # No arguments: the image's CMD, 0.0.0.0:8443 (inside its own network namespace).
    with serving(image, tmp_path / "serve.log", 8443, "--network=none", image) as served:
        served.wait_ready(lambda: _readyz_from_inside(served.name, 8443))
    # The fleet the package ships, not one passed with --nodes.
    [line] = [json.loads(line) for line in served.log.read_text().splitlines()
              if "serving without a cluster" in line]
    assert line["nodes"].endswith("/gangkeeper/webhook/sandbox/data/fleet.yaml"), line
