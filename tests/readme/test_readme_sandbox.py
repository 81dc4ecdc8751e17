"""The README's sandbox walk-through, run as a user types it, in a directory of its own.

The block's lines are taken from README.md and run in one bash session, in order and
unchanged: `eval "$(gangkeeper sandbox up)"` → `kubectl get nodes`, a server-side
dry-run refused with the numbers, a fitting Job applied and bound by the real
scheduler, `gangkeeper status` → `gangkeeper sandbox down`. Between the last two the
test waits for the Job's four pods to be bound (the README's reader looks at
`kubectl get pods -o wide` until they are). The build line is CI's (`.ci/run`). Needs
the control-plane binaries; skips (or fails under GANGKEEPER_E2E=require) without them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders.docs_runs import SANDBOX_WALK_THROUGH as RUNS
from builders.shown_commands import ROOT

from gangkeeper.webhook.sandbox import (
    ALL_COMPONENTS,
    BUILD_COMMAND,
    BinariesMissing,
    Sandbox,
    find_binaries,
)

pytestmark = pytest.mark.e2e
#: The pause before `sandbox down`: until the Job's pods are bound, at most 90 s.
WAIT_BOUND = """\
for _ in $(seq 90); do
  bound=$(kubectl get pods -l batch.kubernetes.io/job-name=resnet-ddp \\
    -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{end}' | wc -w)
  [ "$bound" -eq 4 ] && break
  sleep 1
done
echo "bound: $bound"
"""
MARK = "@@@ "


def script() -> str:
    """The README's lines, each between markers (on stdout and stderr) and its exit code."""
    parts = []
    for i, shown in enumerate(RUNS):
        if shown.command == "gangkeeper sandbox down":
            parts.append(f'echo "{MARK}wait"\n{WAIT_BOUND}')
        parts.append(
            f'echo "{MARK}{i}"; echo "{MARK}{i}" >&2\n{shown.text}\necho "{MARK}rc $?"'
        )
    return "\n".join(parts) + "\n"


def sections(output: str) -> dict[str, str]:
    """Marker → the output after it."""
    pieces = re.split(rf"^{MARK}(\S+)\n", output, flags=re.M)
    return dict(zip(pieces[1::2], pieces[2::2], strict=True))


def test_the_readme_walk_through_works_as_written(tmp_path: Path) -> None:
    try:
        find_binaries()
    except BinariesMissing as exc:
        if os.environ.get("GANGKEEPER_E2E", "").lower() == "require":
            pytest.fail(f"GANGKEEPER_E2E=require: {exc}", pytrace=False)
        pytest.skip(f"control plane not built: run {BUILD_COMMAND}")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    # The `gangkeeper` script of this interpreter, as the README's install puts it on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    try:
        done = subprocess.run(
            ["bash", "-c", script()], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
    finally:
        # Taken down whatever happened above (the README's own `down` is idempotent).
        subprocess.run(
            [sys.executable, "-m", "gangkeeper.webhook.cli", "sandbox", "down"],
            cwd=tmp_path, capture_output=True, timeout=120, check=False,
        )  # fmt: skip
    out, err = sections(done.stdout), sections(done.stderr)
    by_command = {shown.command: str(i) for i, shown in enumerate(RUNS)}

    def output(command: str) -> tuple[str, str, str]:
        """(stdout, stderr, exit code) of one README line."""
        text = out[by_command[command]]
        rc = re.search(rf"^{MARK}rc (\d+)", text, re.M)
        assert rc, f"`{command}` did not finish:\n{done.stdout}\n{done.stderr[-3000:]}"
        return text[: rc.start()], err[by_command[command]], rc[1]

    _, up_err, up_rc = output('eval "$(gangkeeper sandbox up)"')
    assert up_rc == "0", up_err[-3000:]
    # Not a terminal here: one plain progress line per step, numbered to the total.
    total = Sandbox.up_steps(ALL_COMPONENTS)
    steps = [line.split("]")[0] for line in up_err.splitlines() if line.startswith("sandbox [")]
    assert steps == [f"sandbox [{i}/{total}" for i in range(1, total + 1)], up_err

    nodes, _, rc = output("kubectl get nodes")
    assert rc == "0"
    assert len(nodes.splitlines()) >= 7  # a header and the sample fleet: 4 A100 + 2 L4 nodes

    _, refused, rc = output("kubectl apply --dry-run=server -f examples/job-too-big.yaml")
    assert rc == "1"
    assert "needs 5 \N{MULTIPLICATION SIGN} 8 nvidia.com/gpu = 40" in refused, refused
    assert "at most 32" in refused

    applied, applied_err, rc = output(
        "kubectl apply -f examples/job-fits.yaml && kubectl get pods -o wide"
    )
    assert rc == "0", applied_err
    assert "job.batch/resnet-ddp created" in applied

    # The controller lifts the gates of the whole gang and the real scheduler binds it.
    status, status_err, rc = output("gangkeeper status")
    assert rc == "0", status_err
    assert "resnet-ddp" in status
    assert "bound: 4" in out["wait"], out["wait"]

    _, down_err, rc = output("gangkeeper sandbox down")
    assert rc == "0", down_err
    assert not (tmp_path / ".sandbox").exists()
