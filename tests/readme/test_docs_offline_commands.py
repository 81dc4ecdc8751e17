"""The commands of the README and docs/ that need no cluster, run as the pages show them.

- README's quick start: `gangkeeper serve` answering the README's `curl ... /readyz`,
  then the `--owners` line (its virtualenv and `pip install -e .` lines are CI's install
  step, with `[dev]`);
- docs/server.md's offline `gangkeeper serve` lines (with the files they name made);
- docs/install.md's `gangkeeper certs` and `gangkeeper manifests` for a local server;
- docs/policy.md's `helm template ... | gangkeeper check ... -f -` on a chart of one Job;
- docs/performance.md's `python -m bench.policy --quick`.

Each line is run by bash exactly as the page shows it, in a directory of its own with a
HOME of its own (so `~/.local/state` is the test's). The servers listen on the page's
ports (8443, 9443): in a network namespace of their own where `unshare -n` is allowed
(as root here), so nothing else on the machine can hold those ports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders.docs_runs import (
    BENCH_POLICY,
    HELM_PIPE,
    LOCAL_CERTS,
    QUICK_START_SERVE,
    README_OWNERS,
    README_PROBE,
    SERVER_MD_OFFLINE,
)
from builders.shown_commands import ROOT, Shown

from gangkeeper.webhook.sandbox import BUILD_COMMAND, BinariesMissing, find_helm

#: Waits for a server's /readyz (its port as the page gives it), then stops the server.
PROBE = """\
for _ in $(seq 240); do
  curl -s --cacert ~/.local/state/gangkeeper/certs/ca.crt https://127.0.0.1:{port}/readyz && break
  sleep 0.5
done
echo
kill $server; wait $server || true
"""
#: Files the server.md lines name, made from the examples they stand for.
SERVER_MD_FILES = {
    "my-fleet.yaml": (ROOT / "examples" / "fleet.yaml").read_text(),
    "gangkeeper.yaml": "gangTimeoutSeconds: 300\n",
    "my-jobs.yaml": (ROOT / "examples" / "pytorchjob-fits.yaml").read_text(),
}
def own_network() -> list[str]:
    """A prefix that runs a command in a network namespace of its own, with loopback up;
    none where the namespace cannot be made (the page's ports are then the host's)."""
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return ["unshare", "-n"] if probe.returncode == 0 else []


def bash(
    script: str, cwd: Path, env: dict[str, str], *, isolated: bool = False, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    prefix = own_network() if isolated else []
    lo = "ip link set lo up\n" if prefix else ""  # a new namespace's loopback starts down
    done = subprocess.run(
        [*prefix, "bash", "-c", "set -euo pipefail\n" + lo + script],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr[-3000:]}"
    return done


def serving(shown: Shown, port: int = 8443, probe: str | None = None) -> str:
    """A script that starts the page's serve line, probes it, stops it."""
    wait = PROBE.format(port=port)
    if probe:  # the page's own probe, in place of the loop's curl
        wait = wait.replace(wait.splitlines()[1], f"  {probe} && break")
    return f"{shown.text} > serve.log 2>&1 &\nserver=$!\n{wait}"


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "XDG_STATE_HOME"}
    path = f"{Path(sys.executable).parent}:{env['PATH']}"
    return {**env, "HOME": str(tmp_path / "home"), "PATH": path}


def test_the_quick_starts_serve_answers_the_readmes_probe(
    tmp_path: Path, home: dict[str, str]
) -> None:
    """`gangkeeper serve` of the quick start (from this interpreter's install: the
    README's `pip install -e .`, which CI's install step runs with `[dev]`), answering the
    README's own `curl`; then the `--owners` line, from the same checkout."""
    (serve,) = QUICK_START_SERVE
    (probe,) = README_PROBE
    (owners,) = README_OWNERS
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for line in (serve, owners):
        done = bash(serving(line, probe=probe.text), tmp_path, home, isolated=True)
        log = (tmp_path / "serve.log").read_text()
        assert '{"ready":true}' in done.stdout, (line.text, log)
        # The first line says where the certificates are (the README's curl reads them).
        assert f"certificates in {home['HOME']}/.local/state/gangkeeper/certs" in log, log
        assert "serving without a cluster" in log, log


@pytest.mark.parametrize("line", SERVER_MD_OFFLINE, ids=lambda c: c.command)
def test_each_offline_serve_line_of_the_server_page_serves(
    tmp_path: Path, home: dict[str, str], line: Shown
) -> None:
    for name, text in SERVER_MD_FILES.items():
        (tmp_path / name).write_text(text)
    port = 9443 if "--port 9443" in line.command else 8443
    done = bash(serving(line, port=port), tmp_path, home, isolated=True)
    log = (tmp_path / "serve.log").read_text()
    assert '{"ready":true}' in done.stdout, log
    if "--nodes my-fleet.yaml" in line.command:
        assert "my-fleet.yaml" in log, log  # the fleet it was given, not the sample


def test_local_certificates_and_the_manifests_that_trust_them(
    tmp_path: Path, home: dict[str, str]
) -> None:
    certs, manifests = LOCAL_CERTS
    bash(certs.text, tmp_path, home)
    written = Path(home["HOME"]) / ".local" / "state" / "gangkeeper" / "certs"
    assert {"ca.crt", "ca.key", "tls.crt", "tls.key"} <= {p.name for p in written.iterdir()}
    out = bash(manifests.text, tmp_path, home).stdout
    assert "url: https://127.0.0.1:8443/mutate" in out, out
    assert "caBundle:" in out and "MutatingWebhookConfiguration" in out, out


def test_a_rendered_chart_piped_into_check(tmp_path: Path, home: dict[str, str]) -> None:
    try:
        helm = find_helm()
    except BinariesMissing as exc:
        if os.environ.get("GANGKEEPER_E2E", "").lower() == "require":
            pytest.fail(f"GANGKEEPER_E2E=require: {exc}", pytrace=False)
        pytest.skip(f"{exc} (build: {BUILD_COMMAND} helm)")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    chart = tmp_path / "chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: train\nversion: 0.1.0\n")
    shutil.copy(ROOT / "examples" / "job-fits.yaml", chart / "templates" / "job.yaml")
    env = {**home, "PATH": f"{helm.parent}:{home['PATH']}"}
    (line,) = HELM_PIPE
    out = bash(line.text, tmp_path, env).stdout
    assert out.startswith("admit   Job default/resnet-ddp"), out
    assert "1 admitted, 0 rejected, 0 errors" in out, out


def test_the_policy_benchmark_measures_every_size() -> None:
    (line,) = BENCH_POLICY
    out = bash(line.text, ROOT, dict(os.environ), timeout=600).stdout
    for nodes in ("10", "1,000", "5,000", "50,000"):
        assert f"| pod decision | {nodes} |" in out, out
