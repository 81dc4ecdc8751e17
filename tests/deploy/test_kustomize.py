"""`kubectl kustomize` over deploy/ and its overlays gives exactly what the renderer gives.

The base is committed renderer output (tests/unit/install/test_manifests.py); the overlays are
hand-written patches, so this is where they are proven: the cert-manager overlay must
equal `render_manifests(cert_mode="cert-manager")` and the coscheduling one
`render_manifests(backend="coscheduling")`, object for object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import REPO, run_kubectl

from gangkeeper.webhook.install import render_manifests


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def kustomize(kubectl: Path, directory: str) -> dict[tuple[str, str, str], Any]:
    done = run_kubectl(kubectl, "kustomize", str(REPO / directory))
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert docs, f"kubectl kustomize {directory} printed nothing"
    return {key(d): d for d in docs}


@pytest.mark.parametrize(
    ("directory", "kwargs"),
    [
        ("deploy", {}),
        ("deploy/base", {}),
        ("deploy/overlays/cert-manager", {"cert_mode": "cert-manager"}),
        ("deploy/overlays/coscheduling", {"backend": "coscheduling"}),
    ],
)
def test_kustomize_output_equals_the_renderer(
    kubectl_bin: Path, directory: str, kwargs: dict[str, Any]
) -> None:
    built = kustomize(kubectl_bin, directory)
    expected = {key(o): o for o in render_manifests(**kwargs)}
    assert sorted(built) == sorted(expected)
    for k, obj in expected.items():
        assert built[k] == obj, f"{directory}: {k} differs from the renderer"
