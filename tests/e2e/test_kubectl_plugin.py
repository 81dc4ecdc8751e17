"""`kubectl gangkeeper status|explain` through kubectl's plugin mechanism, on the sandbox.

kubectl runs any executable `kubectl-gangkeeper` on PATH for `kubectl gangkeeper ...`.
The script pip installs from pyproject's `[project.scripts]` is used when it is on
PATH; an editable install made before the entry point existed has none, and then the
test writes the same three lines. kubectl is the sandbox's own build.

A gang of 8 with 3 members (owned by a ConfigMap, as in the controller's scenario 5)
waits; `explain` of a member and of its owner describe it like `kubectl describe`:
members present and needed, the GPUs compared with, its pods and the controller's
Events.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, gang_pod, unique
from builders.events import events_in

from gangkeeper.webhook.controller import GangController
from gangkeeper.webhook.sandbox import find_binaries

SCRIPT = f"""#!{sys.executable}
import sys
from gangkeeper.webhook.cli import kubectl_main
sys.exit(kubectl_main())
"""


@pytest.fixture
def plugin_env(cluster: Any, tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "kubectl-gangkeeper"
    installed = shutil.which("kubectl-gangkeeper")
    if installed:  # the script pip installed from pyproject's [project.scripts]
        plugin.symlink_to(installed)
    else:  # an editable install made before the entry point existed: the same script
        plugin.write_text(SCRIPT)
        plugin.chmod(0o755)
    (bin_dir / "kubectl").symlink_to(find_binaries().kubectl)
    path = f"{bin_dir}:{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "KUBECONFIG": cluster.kubeconfig}


def kubectl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_kubectl_finds_the_plugin(plugin_env: dict[str, str]) -> None:
    listed = kubectl(plugin_env, "plugin", "list")
    assert "kubectl-gangkeeper" in listed.stdout, listed.stdout + listed.stderr
    helped = kubectl(plugin_env, "gangkeeper", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "usage: kubectl gangkeeper" in helped.stdout
    commands = set(re.findall(r"^    (\w+)  ", helped.stdout, re.M))
    assert commands == {"status", "check", "explain", "view"}, helped.stdout


def test_kubectl_gangkeeper_explains_why_a_gang_waits(
    cluster: Any,
    gang_namespace: str,
    own_controller: GangController,
    plugin_env: dict[str, str],
) -> None:
    pool = unique("explain")
    cluster.create_gpu_nodes(pool, 1, 8, labels={POOL_LABEL: pool})
    owner = cluster.core.create_namespaced_config_map(
        gang_namespace, {"metadata": {"name": "trainer"}}
    )
    for i in range(3):
        pod = gang_pod(f"w{i}", pool, gang="waits", min_member=8)
        pod["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "trainer",
             "uid": owner.metadata.uid, "controller": True}
        ]  # fmt: skip
        cluster.core.create_namespaced_pod(gang_namespace, pod)
    cluster.wait_for(
        lambda: bool(events_in(cluster.api_client, gang_namespace, "GangIncomplete")),
        timeout=30,
        message="the controller's GangIncomplete Events",
    )

    status = kubectl(plugin_env, "gangkeeper", "status", "-n", gang_namespace)
    assert status.returncode == 0, status.stderr
    assert "3/8" in status.stdout

    by_pod = kubectl(plugin_env, "gangkeeper", "explain", "pod/w1", "-n", gang_namespace)
    assert by_pod.returncode == 0, by_pod.stderr
    text = by_pod.stdout
    assert f"Name:         {gang_namespace}/waits" in text
    assert "Owner:        ConfigMap/trainer" in text
    assert "State:        waiting (incomplete)" in text
    assert "Members:      3 present / 8 needed (3 gated, 0 bound)" in text
    assert "Why:          3 of 8 members exist" in text
    assert "Asks for:     nvidia.com/gpu: 3" in text
    assert f"{pool}-0" in text  # the node it may use, with its free GPUs
    for name in ("w0", "w1", "w2"):
        assert re.search(rf"^  {name}\s+yes\s+<none>$", text, re.M), text
    assert "GangIncomplete" in text and "gangkeeper.io/controller" in text

    print(text)  # shown with -s: what a user sees
    by_owner = kubectl(
        plugin_env, "gangkeeper", "explain", "configmap/trainer", "-n", gang_namespace
    )
    assert by_owner.returncode == 0, by_owner.stderr
    # The same gang (the Age line moves on between the two calls).
    assert by_owner.stdout.splitlines()[:6] == text.splitlines()[:6]

    missing = kubectl(plugin_env, "gangkeeper", "explain", "nobody", "-n", gang_namespace)
    assert missing.returncode == 1
    assert "is not a live member of a gang" in missing.stderr
