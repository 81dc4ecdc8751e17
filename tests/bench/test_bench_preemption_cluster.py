"""`python -m bench.preemption_cluster --quick`: the preemption trace on a sandbox, on
gangkeeper's backend and on `native` in the same run.

Not a performance test: the times are reported in docs/performance.md, not judged here.
What is checked is what a user relies on when a high-priority gang arrives on a full
fleet: on gangkeeper's backend every high Job is bound whole, no Job is ever seen
partly bound, exactly the least GPUs that could make room are preempted, and no
victim's Job fails (`backoffLimit: 0`: it is suspended and resumed, not counted
failed). The native backend's row is measured in the same run (its victims' Jobs
failing is Kubernetes' behaviour, stated in docs/preemption.md, not asserted here).
Starts its own sandbox (kube-apiserver, etcd, kube-scheduler, kube-controller-manager,
kwok, gangkeeper): skipped without the built binaries, failed under GANGKEEPER_E2E=require.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from builders.binaries import need_sandbox_binaries

ROOT = Path(__file__).resolve().parents[2]


def test_high_gangs_preempt_whole_jobs_and_no_victim_fails_beside_native(tmp_path: Path) -> None:
    need_sandbox_binaries()
    out = tmp_path / "preemption_cluster.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench.preemption_cluster", "--quick", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["backend"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"gate", "native"}, rows
    gate = rows["gate"]
    assert gate["all_bound"] and gate["partly_bound"] == 0, gate
    assert gate["preempted_over_needed"] == gate["preempted_over_needed_max"] == 1.0, gate
    # Two arrivals on a full fleet, each taking two whole low Jobs, none of which fails.
    assert gate["victim_jobs"] == 4 and gate["victim_jobs_failed"] == 0, gate
    assert 0 < gate["bound_s_p50"] <= gate["bound_s_p99"], gate
    assert gate["lost_gpu_s"] > 0, gate
    assert rows["native"]["all_bound"], rows["native"]
