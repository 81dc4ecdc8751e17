"""The image `deploy/image/build.sh` builds, as tests reach it: podman with the build's
settings, the image's reference, and a fixture body that skips (or, with
`GANGKEEPER_IMAGE=require`, fails) when it is not there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = "deploy/image/build.sh"
#: podman's settings as build.sh uses them (the file says why).
ENV = {**os.environ, "CONTAINERS_CONF": str(REPO / "deploy/image/containers.conf")}


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, env=ENV,
                          timeout=timeout, check=False)


def image_ref() -> str:
    version = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert version, "pyproject.toml has no version"
    return os.environ.get("GANGKEEPER_IMAGE_REF", f"localhost/gangkeeper:{version.group(1)}")


def built_image() -> str:
    """The image's reference; skips the test (fails it under GANGKEEPER_IMAGE=require)
    when podman or the image is missing."""
    ref = image_ref()
    if shutil.which("podman") is None:
        reason = f"podman is not installed; {BUILD} installs it and builds {ref}"
    elif podman("image", "exists", ref).returncode != 0:
        reason = f"no image {ref}; build it with {BUILD}"
    else:
        return ref
    if os.environ.get("GANGKEEPER_IMAGE", "").lower() == "require":
        pytest.fail(f"GANGKEEPER_IMAGE=require: {reason}", pytrace=False)
    pytest.skip(reason)
