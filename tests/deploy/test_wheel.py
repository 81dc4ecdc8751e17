"""The wheel is the product: what `pip wheel .` builds (the Dockerfile's first stage)
holds every module and data file of the source tree, and an install of it alone runs.

CI installs the project editable, which reads the source tree and so cannot notice a
package left out of `[tool.setuptools] packages`; a wheel can. (One was: the
`policies/autoscaling` package, imported by the configuration, so the image's
`gangkeeper serve` could not start.) The wheel is built with pip's build isolation,
from a copy of the package folders that keeps symlinks as symlinks, as the Dockerfile's
`COPY` does; the venv borrows the dependencies already installed but not gangkeeper
itself (nor the editable install's finder). A data file that was a symlink out of the
package (`webhook/sandbox/data/fleet.yaml` -> `examples/fleet.yaml`) dangled in the
image's build stage, so the image's `gangkeeper serve` found no fleet without `--nodes`.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Source folder -> the package it installs as (pyproject's package-dir).
PACKAGES = {"policies": "gangkeeper/policies", "webhook": "gangkeeper/webhook",
            "certs": "gangkeeper/certs"}
#: Files under the package folders that are not part of the package.
NOT_SHIPPED = ("__pycache__", ".pyc", ".key", ".crt", ".pem")


def _source_files() -> set[str]:
    """Every file of the source packages, as its path inside the wheel."""
    found = set()
    for folder, package in PACKAGES.items():
        for path in (REPO / folder).rglob("*"):
            relative = path.relative_to(REPO / folder)
            if path.is_file() and not any(part in str(relative) for part in NOT_SHIPPED):
                found.add(f"{package}/{relative.as_posix()}")
    return found


def run_python(program: Path, *args: str, cwd: Path | None = None
               ) -> subprocess.CompletedProcess[str]:
    """`program ARGS` outside the repository (nothing found in the work tree by accident)
    and without PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(program), *args], cwd=cwd or Path("/"), env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    # From a copy of what the Dockerfile copies: setuptools builds in the source folder,
    # and a build/ left there by an earlier build would put back what pyproject leaves out.
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in PACKAGES:
        skipped = shutil.ignore_patterns("__pycache__", *(f"*{s}" for s in NOT_SHIPPED))
        # symlinks=True: a link is copied as a link, as `COPY` copies it.
        shutil.copytree(REPO / folder, source / folder, ignore=skipped, symlinks=True)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(out), str(source)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    [built] = out.glob("gangkeeper-*.whl")
    yield built


def test_the_wheel_holds_every_module_and_data_file_of_the_source_tree(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if not name.endswith("/")}
    missing = sorted(_source_files() - shipped)
    assert not missing, f"left out of the wheel (pyproject's packages/package-data): {missing}"


def test_no_symlink_in_the_package_folders_points_outside_them() -> None:
    # The build stage copies only the package folders: a link out of them dangles there.
    escaping = []
    for folder in PACKAGES:
        root = (REPO / folder).resolve()
        for path in (REPO / folder).rglob("*"):
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                escaping.append(f"{path.relative_to(REPO)} -> {os.readlink(path)}")
    assert not escaping, f"symlinks out of the package (make them real files): {escaping}"


@dataclass
class Installed:
    """A venv with the wheel installed, and a scratch folder outside the repository."""

    python: Path
    gangkeeper: Path  # the console script the wheel installs
    scratch: Path

    def run(self, program: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return run_python(program, *args, cwd=self.scratch)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    env_dir = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    # The dependencies from this interpreter's site-packages, named in a .pth file: its
    # folders join sys.path, but the .pth files there (the editable install's finder,
    # which would supply any module the wheel lacks from the work tree) are not run.
    site = run_python(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    Path(site.stdout.strip(), "dependencies.pth").write_text(
        "\n".join(sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})) + "\n"
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    where = run_python(python, "-c", "import gangkeeper.webhook.cli, "
                       "gangkeeper.policies.settings.config as c; print(c.__file__)")
    assert where.returncode == 0, where.stderr[-2000:]
    assert str(env_dir) in where.stdout, f"imported from {where.stdout.strip()}, not the wheel"
    return Installed(python, env_dir / "bin" / "gangkeeper", tmp_path_factory.mktemp("scratch"))


def test_an_install_of_the_wheel_alone_checks_the_examples_and_renders_the_manifests(
    installed: Installed,
) -> None:
    examples = REPO / "examples"
    fits = installed.run(installed.gangkeeper, "check", "--nodes", str(examples / "fleet.yaml"),
                         "-f", str(examples / "job-fits.yaml"))
    assert fits.returncode == 0, fits.stdout + fits.stderr
    too_big = installed.run(installed.gangkeeper, "check", "--nodes",
                            str(examples / "fleet.yaml"), "-f", str(examples / "job-too-big.yaml"))
    assert too_big.returncode == 1, too_big.stdout + too_big.stderr
    manifests = installed.run(installed.gangkeeper, "manifests")
    assert manifests.returncode == 0, manifests.stderr[-2000:]
    assert "kind: MutatingWebhookConfiguration" in manifests.stdout


def test_the_installed_wheel_ships_the_sample_fleet_as_examples_has_it(
    installed: Installed,
) -> None:
    read = installed.run(
        installed.python, "-c", "import importlib.resources as r, sys; sys.stdout.write("
        "(r.files('gangkeeper.webhook.sandbox') / 'data' / 'fleet.yaml').read_text())",
    )
    assert read.returncode == 0, read.stderr[-2000:]
    assert read.stdout == (REPO / "examples" / "fleet.yaml").read_text()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ready(url: str, ca: Path) -> bool:
    try:
        context = ssl.create_default_context(cafile=str(ca))
        with urllib.request.urlopen(f"{url}/readyz", context=context, timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def test_the_installed_wheels_serve_finds_its_fleet_without_nodes(
    installed: Installed, tmp_path: Path
) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KUBECONFIG")}
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(installed.gangkeeper), "serve", "--host", "127.0.0.1", "--port", str(port),
             "--cert-dir", str(tmp_path / "certs")],
            cwd=installed.scratch, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while server.poll() is None and time.monotonic() < deadline:
            if _ready(f"https://127.0.0.1:{port}", tmp_path / "certs" / "ca.crt"):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"serve without --nodes never answered /readyz (exit {server.poll()}):"
                        f"\n{log.read_text()[-3000:]}")
    finally:
        server.terminate()
        server.wait(timeout=30)
