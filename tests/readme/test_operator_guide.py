"""docs/operator-guide.md, run as an operator types it.

Every ```sh block of the guide is named (`<!-- block: NAME -->`) and every name is run
here, by bash, exactly as written, with `$NS` and `$POD` set and `kubectl` (the
sandbox's build), `helm` (`deploy/sandbox/build.sh helm`), `gangkeeper` and the
`kubectl-gangkeeper` plugin on PATH. A block the guide gains without a step here
fails the first test.

One sandbox (real control plane, kwok as the kubelet of two GPU nodes, and the
sandbox's own `gangkeeper serve` with a 2-second gang timeout, so Events come at
once), in the guide's order of concerns:

1. opt a namespace in, leave a gang of 2 with one member waiting, troubleshoot it;
2. stop the sandbox's gangkeeper; install with kustomize (its objects take over the
   sandbox's registration), check what happens when gangkeeper is down, uninstall;
3. install with Helm, upgrade (backend and replicas), then uninstall safely: the
   waiting pod is listed, stays gated after the uninstall and a plain `gangkeeper ungate`,
   and `gangkeeper ungate --force` lets it schedule.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import polling

from gangkeeper.webhook.sandbox import (
    BUILD_COMMAND,
    BinariesMissing,
    Sandbox,
    find_binaries,
    find_helm,
)
from gangkeeper.webhook.sandbox.neighbours import KWOK

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "operator-guide.md"
NS = "team-a"
POD = "waiting-0"
BLOCK = re.compile(r"<!-- block: ([\w-]+) -->\n```sh\n(.*?)```", re.S)
PLUGIN = f"""#!{sys.executable}
import sys
from gangkeeper.webhook.cli import kubectl_main
sys.exit(kubectl_main())
"""
#: The steps below, by the block they run (kept in the guide's order of concerns).
STEPS = (
    "opt-in",
    "troubleshoot",
    "install-kustomize",
    "down",
    "uninstall-kustomize",
    "install-helm",
    "upgrade",
    "uninstall-helm",
    "pools",
)


def blocks() -> dict[str, str]:
    text = GUIDE.read_text()
    found = BLOCK.findall(text)
    assert len(found) == text.count("```sh"), "every ```sh block must be named"
    return dict(found)


def test_every_block_of_the_guide_is_run_here() -> None:
    assert sorted(blocks()) == sorted(STEPS)


class Operator:
    """A shell with the guide's environment, against the sandbox."""

    def __init__(self, sandbox: Sandbox, env: dict[str, str], workdir: Path) -> None:
        self.sandbox = sandbox
        self.env = env
        self.workdir = workdir

    def run(self, name: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        script = "set -euo pipefail\n" + blocks()[name]
        done = subprocess.run(
            ["bash", "-c", script], cwd=self.workdir, env=self.env,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"block {name}:\n{done.stdout}\n{done.stderr}"
        return done

    def kubectl(self, *args: str, input: str | None = None) -> str:
        done = self.sandbox.kubectl(*args, input=input, check=False)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 120.0) -> Any:
    return polling.wait_for(predicate, timeout, interval=0.5, message=what)


@pytest.fixture(scope="module")
def operator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    try:
        kubectl = find_binaries().kubectl
        helm = find_helm()
    except BinariesMissing as exc:
        if os.environ.get("GANGKEEPER_E2E", "").lower() == "require":
            pytest.fail(f"GANGKEEPER_E2E=require: {exc}", pytrace=False)
        pytest.skip(f"{exc} (build: {BUILD_COMMAND})")
    base = tmp_path_factory.mktemp("operator-guide")
    config = base / "config.yaml"
    config.write_text("gangTimeoutSeconds: 2\n")
    sandbox = Sandbox(base / "sandbox")
    info = sandbox.up(node_count=2, components=(KWOK,), config=config)
    bin_dir = base / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(kubectl)
    (bin_dir / "helm").symlink_to(helm)
    plugin = bin_dir / "kubectl-gangkeeper"
    installed = shutil.which("kubectl-gangkeeper")
    if installed:  # the script pip installed from pyproject's [project.scripts]
        plugin.symlink_to(installed)
    else:  # an editable install made before the entry point existed: the same script
        plugin.write_text(PLUGIN)
        plugin.chmod(0o755)
    workdir = base / "checkout"
    workdir.mkdir()
    for name in ("deploy", "examples"):  # what the guide's commands read, by relative path
        (workdir / name).symlink_to(ROOT / name)
    path = f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = {
        **os.environ, "PATH": path, "KUBECONFIG": str(info.kubeconfig),
        "HOME": str(base), "NS": NS, "POD": POD,
    }  # fmt: skip
    try:
        yield Operator(sandbox, env, workdir)
    finally:
        sandbox.down()


def waiting_member() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": POD,
            "annotations": {"gangkeeper.io/gang-name": "llm", "gangkeeper.io/min-member": "2"},
        },
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "registry.invalid/train",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }


def pod(op: Operator) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(op.kubectl("get", "pod", POD, "-n", NS, "-o", "json"))
    return found


def gated(op: Operator) -> bool:
    gates = pod(op)["spec"].get("schedulingGates") or []
    return any(g["name"] == "gangkeeper.io/gang" for g in gates)


def test_1_a_waiting_gang_is_explained(operator: Operator) -> None:
    operator.run("opt-in")
    labels = json.loads(operator.kubectl("get", "namespace", NS, "-o", "json"))["metadata"]
    assert labels["labels"]["gangkeeper.io/enabled"] == "true"
    operator.kubectl("create", "-n", NS, "-f", "-", input=json.dumps(waiting_member()))
    assert gated(operator)
    wait_for(
        lambda: "GangIncomplete" in operator.kubectl("get", "events", "-n", NS),
        "the controller's GangIncomplete Event",
    )
    out = operator.run("troubleshoot").stdout
    assert re.search(r"llm\s+gate\s+1/2", out), out  # status
    assert out.count("Members:      1 present / 2 needed (1 gated, 0 bound)") == 2  # explain x2
    assert out.count("Why:          1 of 2 members exist") == 2
    assert "GangIncomplete" in out.split("Events:")[-1]


def test_2_kustomize_install_down_and_uninstall(operator: Operator) -> None:
    operator.sandbox.stop_gangkeeper()
    operator.run("install-kustomize")
    status = json.loads(
        operator.kubectl("get", "deployment", "gangkeeper", "-n", "gangkeeper-system", "-o", "json")
    )["status"]
    assert status["readyReplicas"] == status["updatedReplicas"] == 2
    down = operator.run("down").stdout.splitlines()
    assert down[0] == "Fail"
    assert down[1] == "Ignore Ignore"
    assert down[2].split()[:2] == ["NAME", "MIN"]
    operator.run("uninstall-kustomize")
    assert not operator.kubectl(
        "get", "namespace", "gangkeeper-system", "--ignore-not-found", "-o", "name"
    )
    assert gated(operator), "uninstalling must not touch the waiting pod"


def test_3_helm_install_upgrade_and_safe_uninstall(operator: Operator) -> None:
    out = operator.run("install-helm").stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    assert 'deployment "gangkeeper" successfully rolled out' in out
    operator.run("upgrade")
    deployment = json.loads(
        operator.kubectl("get", "deployment", "gangkeeper", "-n", "gangkeeper-system", "-o", "json")
    )
    assert deployment["status"]["readyReplicas"] == 3
    config = operator.kubectl(
        "get", "configmap", "gangkeeper-config", "-n", "gangkeeper-system",
        "-o", "jsonpath={.data.config\\.yaml}",
    )  # fmt: skip
    assert yaml.safe_load(config) == {"backend": "coscheduling"}

    out = operator.run("uninstall-helm").stdout
    # Listed before the uninstall and again after it: an incomplete gang never fits, so
    # `ungate` leaves it gated (all-or-nothing) until `--force` is asked for.
    assert out.count(f"left gated {NS}/llm: 1 members") == 2, out
    assert f"forced {NS}/llm: 1 of 1 gated members" in out, out
    assert not operator.kubectl(
        "get", "mutatingwebhookconfiguration", "--ignore-not-found", "-o", "name"
    ).strip()
    assert not gated(operator)
    wait_for(lambda: pod(operator)["spec"].get("nodeName"), "the ungated pod to be scheduled")


def test_autoscaled_pools_count_as_capacity(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    script = "set -euo pipefail\n" + blocks()["pools"]
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env={**os.environ, "PATH": path},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split("rejected without the pool\n")
    assert first.startswith("reject") and "hold at most 32" in first
    assert second.startswith("admit")
