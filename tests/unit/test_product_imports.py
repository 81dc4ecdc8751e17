"""The installed package needs none of the test tools: every module of gangkeeper's
policies, webhook and certs imports with pytest, hypothesis and pytest-kubernetes
unimportable (they are `dev` extras, absent from the image and a user's install)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

TEST_ONLY = ("pytest", "_pytest", "pytest_kubernetes", "hypothesis")

SCRIPT = textwrap.dedent(
    """
    import importlib, importlib.abc, pkgutil, sys

    BLOCKED = set(sys.argv[1].split(","))

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"{name} is a test-only package", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    import gangkeeper.certs, gangkeeper.policies, gangkeeper.webhook

    failures = []
    for package in (gangkeeper.policies, gangkeeper.webhook, gangkeeper.certs):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith(".__main__"):
                continue  # importing it runs the CLI
            try:
                importlib.import_module(info.name)
            except ImportError as exc:
                failures.append(f"{info.name}: {exc}")
    print("\\n".join(failures))
    sys.exit(1 if failures else 0)
    """
)


def test_no_product_module_needs_a_test_only_package() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(TEST_ONLY)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == ""
