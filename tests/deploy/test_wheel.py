"""The wheel is the product: what `pip wheel .` builds (the Dockerfile's first stage)
holds every module and data file of the source tree, and an install of it alone runs.

CI installs the project editable, which reads the source tree and so cannot notice a
package left out of `[tool.setuptools] packages`; a wheel can. (One was: the
`policies/autoscaling` package, imported by the configuration, so the image's
`gangkeeper serve` could not start.) The wheel is built with pip's build isolation,
as the Dockerfile builds it; the venv borrows the dependencies already installed but
not gangkeeper itself (nor the editable install's finder).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from collections.abc import Iterator
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
        shutil.copytree(REPO / folder, source / folder, ignore=skipped)
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


def test_an_install_of_the_wheel_alone_checks_the_examples_and_renders_the_manifests(
    wheel: Path, tmp_path: Path
) -> None:
    env_dir = tmp_path / "venv"
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

    def run(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return run_python(program, *args, cwd=tmp_path)

    gangkeeper = env_dir / "bin" / "gangkeeper"  # the console script the wheel installs
    where = run(python, "-c", "import gangkeeper.webhook.cli, gangkeeper.policies.config as c; "
                "print(c.__file__)")
    assert where.returncode == 0, where.stderr[-2000:]
    assert str(env_dir) in where.stdout, f"imported from {where.stdout.strip()}, not the wheel"
    examples = REPO / "examples"
    fits = run(gangkeeper, "check", "--nodes", str(examples / "fleet.yaml"),
               "-f", str(examples / "job-fits.yaml"))
    assert fits.returncode == 0, fits.stdout + fits.stderr
    too_big = run(gangkeeper, "check", "--nodes", str(examples / "fleet.yaml"),
                  "-f", str(examples / "job-too-big.yaml"))
    assert too_big.returncode == 1, too_big.stdout + too_big.stderr
    manifests = run(gangkeeper, "manifests")
    assert manifests.returncode == 0, manifests.stderr[-2000:]
    assert "kind: MutatingWebhookConfiguration" in manifests.stdout
