"""The README's and docs' commands that read or serve a live cluster, run as the pages
show them against the session's sandbox.

A reader's machine is made in a directory of its own: `~/.kube/config` is the
sandbox's kubeconfig (with a second context, `prod`, for docs/view.md's `--context
prod`), `kubectl`, the `kubectl-gangkeeper` plugin and `gangkeeper` on PATH, and
`examples/` beside it. Then, in order:

1. the README's (and docs/install.md's) `kubectl label namespace team-a ...` opts
   `team-a` in, and a gang of 2 with one member, pod `w1`, waits there gated;
2. docs/controller.md's block (status, explain, the plugin, view, the Events), with a
   controller of the test's own reporting a stuck gang after 2 s (the sandbox's waits 5
   minutes);
3. `gangkeeper check --kubeconfig` of the README and docs/policy.md;
4. docs/view.md's three `view` lines, each page fetched through the URL it prints;
5. docs/server.md's `serve --kubeconfig ~/.kube/config` and `serve --controller-only ...`,
   each answering its probe (their controllers stand by: the sandbox's holds the Lease);
6. docs/install.md's `gangkeeper ungate --force`, which releases `w1` (the plain
   `ungate` lines are run by the operator guide's own sandbox).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from builders.docs_runs import (
    CHECK_LIVE,
    CONTROLLER_MD,
    LABEL_TEAM_A,
    SERVER_MD_CLUSTER,
    TEAM_A,
    UNGATE_FORCE,
    VIEW_MD,
)
from builders.shown_commands import ROOT, Shown
from conftest import Cluster
from kubernetes import config as kube_config

from gangkeeper.policies.settings.config import load_config
from gangkeeper.webhook.controller import GangController

NS = TEAM_A
POD = "w1"
PLUGIN = f"""#!{sys.executable}
import sys
from gangkeeper.webhook.cli import kubectl_main
sys.exit(kubectl_main())
"""


@dataclass
class Reader:
    """A shell on the reader's machine."""

    workdir: Path
    env: dict[str, str]

    def run(self, line: Shown, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line.text], cwd=self.workdir, env=self.env,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip

    def start(self, line: Shown) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["bash", "-c", f"exec {line.text}"], cwd=self.workdir, env=self.env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip


def stop(process: subprocess.Popen[str]) -> str:
    process.terminate()
    try:
        out, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    return out


def served_url(process: subprocess.Popen[str]) -> str:
    """The URL `gangkeeper view` prints first."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("gangkeeper view: serving http://127.0.0.1:"), line + stop(process)
    return line.split("serving ", 1)[1].strip()


def with_prod_context(kubeconfig: str) -> str:
    config = yaml.safe_load(Path(kubeconfig).read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    config["contexts"].append({"name": "prod", "context": current["context"]})
    return yaml.safe_dump(config)


@pytest.fixture(scope="module")
def reader(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reader]:
    base = tmp_path_factory.mktemp("docs-commands")
    home = base / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text(with_prod_context(cluster.kubeconfig))
    bin_dir = base / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(cluster._kubectl)
    plugin = bin_dir / "kubectl-gangkeeper"
    plugin.write_text(PLUGIN)
    plugin.chmod(0o755)
    workdir = base / "work"
    workdir.mkdir()
    (workdir / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "XDG_STATE_HOME")}
    path = f"{bin_dir}:{Path(sys.executable).parent}:{env['PATH']}"
    # BROWSER: what `view --open` starts (Python's webbrowser reads it); here a no-op.
    env |= {"HOME": str(home), "PATH": path, "BROWSER": "true"}
    cluster.new_namespace(opted_in=False, name=NS)
    try:
        yield Reader(workdir, env)
    finally:
        cluster.delete_namespace(NS)


def waiting_member() -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": POD, "annotations": {
            "gangkeeper.io/gang-name": "llm", "gangkeeper.io/min-member": "2"}},
        "spec": {"containers": [{
            "name": "train", "image": "registry.invalid/train",
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    })  # fmt: skip


def gates(cluster: Cluster) -> list[str]:
    pod = json.loads(cluster.kubectl("get", "pod", POD, "-n", NS, "-o", "json").stdout)
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


@pytest.fixture(scope="module")
def stuck_reporter(cluster: Cluster, reader: Reader) -> Iterator[None]:
    """A controller of team-a alone, with its own Lease and a 2 s stuck timeout."""
    api = kube_config.new_client_from_config(config_file=cluster.kubeconfig)
    controller = GangController(
        api, load_config({"gangTimeoutSeconds": 2}), namespace=NS, identity="docs-reporter"
    )
    controller.start()
    try:
        cluster.wait_for(lambda: controller.is_leader and controller.synced, timeout=30,
                         message="team-a's controller elected and synced")
        yield
    finally:
        controller.stop()
        api.close()


def test_1_the_shown_label_opts_team_a_in_and_a_member_waits(
    cluster: Cluster, reader: Reader
) -> None:
    for line in LABEL_TEAM_A:  # the README's and install.md's: the same line, run twice
        done = reader.run(line)
        assert done.returncode == 0, done.stderr
    labels = json.loads(cluster.kubectl("get", "namespace", NS, "-o", "json").stdout)
    assert labels["metadata"]["labels"]["gangkeeper.io/enabled"] == "true"
    cluster.kubectl("create", "-n", NS, "-f", "-", input=waiting_member())
    assert "gangkeeper.io/gang" in gates(cluster)


def test_2_the_controller_pages_commands_explain_the_waiting_gang(
    cluster: Cluster, reader: Reader, stuck_reporter: None
) -> None:
    status, status_json, explain, plugin, view, events = CONTROLLER_MD
    cluster.wait_for(
        lambda: "GangIncomplete" in reader.run(events).stdout, timeout=60,
        message="the GangIncomplete Event listed by the page's kubectl get events",
    )  # fmt: skip
    out = reader.run(status)
    assert out.returncode == 0, out.stderr
    assert "llm" in out.stdout and "1/2" in out.stdout, out.stdout
    out = reader.run(status_json)
    assert out.returncode == 0, out.stderr
    (record,) = [r for r in json.loads(out.stdout) if r["gang"] == "llm"]
    assert record["namespace"] == NS
    for line in (explain, plugin):
        out = reader.run(line)
        assert out.returncode == 0, (line.text, out.stderr)
        assert "Members:      1 present / 2 needed (1 gated, 0 bound)" in out.stdout, out.stdout
        assert "GangIncomplete" in out.stdout.split("Events:")[-1], out.stdout
    page_of(reader, view, expect=NS)


def page_of(reader: Reader, line: Shown, expect: str) -> None:
    """Start a `view` line, fetch the page at the URL it prints, stop it."""
    process = reader.start(line)
    try:
        url = served_url(process)
        # The socket is bound before the URL is printed, but listens only once uvicorn runs.
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    assert response.status == 200
                    body = response.read().decode()
                break
            except urllib.error.URLError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert expect in body, body[:2000]
    finally:
        stop(process)


def test_3_check_against_the_live_clusters_nodes(cluster: Cluster, reader: Reader) -> None:
    # Two 8-GPU nodes of this test's own: the TrainJob's 2 x 8 GPUs fit on the live Nodes.
    cluster.create_gpu_nodes(f"docs-{uuid.uuid4().hex[:6]}", 2, 8)
    assert len(CHECK_LIVE) == 2  # the README's and policy.md's: the same line
    for line in CHECK_LIVE:
        out = reader.run(line)
        assert out.returncode == 0, out.stdout + out.stderr
        # The file's first document is the runtime it names (not a gang), the second the job.
        assert "admit   TrainJob default/llama-finetune: gang llama-finetune minMember=2" in (
            out.stdout
        ), out.stdout
        assert "[examples/trainjob-fits.yaml document 2]" in out.stdout, out.stdout
        assert out.stdout.splitlines()[-1] == "2 admitted, 0 rejected, 0 errors", out.stdout


def test_4_the_view_pages_lines_serve_the_page(reader: Reader) -> None:
    every, one_namespace, options = VIEW_MD
    page_of(reader, every, expect=NS)
    page_of(reader, one_namespace, expect=NS)
    assert options.command.startswith("gangkeeper view --port 8089")
    page_of(reader, options, expect=NS)  # read through the kubeconfig's context `prod`


def test_5_serve_against_the_cluster_answers_its_probes(reader: Reader) -> None:
    certs = Path(reader.env["HOME"]) / ".local" / "state" / "gangkeeper" / "certs"
    for line, probe in zip(SERVER_MD_CLUSTER, ("/readyz", "/healthz"), strict=True):
        process = reader.start(line)
        try:
            answer = ""
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and process.poll() is None:
                done = subprocess.run(
                    ["curl", "-s", "--cacert", str(certs / "ca.crt"),
                     f"https://127.0.0.1:8443{probe}"],
                    capture_output=True, text=True, timeout=30, check=False,
                )  # fmt: skip
                if done.returncode == 0 and done.stdout:
                    answer = done.stdout
                    break
                time.sleep(0.5)
        finally:
            log = stop(process)
        assert answer, f"{line.text}: no answer on {probe}\n{log[-3000:]}"
        assert "serving without a cluster" not in log, log


def test_6_ungate_force_releases_the_waiting_member(cluster: Cluster, reader: Reader) -> None:
    (line,) = UNGATE_FORCE
    out = reader.run(line)
    assert out.returncode == 0, out.stderr
    assert f"forced {NS}/llm: 1 of 1 gated members" in out.stdout, out.stdout
    assert "gangkeeper.io/gang" not in gates(cluster)
