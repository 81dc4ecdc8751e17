"""`gangkeeper check` on KubeRay's own samples, as the ray-operator v1.5.0 module ships
them (`ray-operator/config/samples/` in the Go module cache, where
`deploy/sandbox/build.sh kuberay` downloads the module).

The samples request CPUs, not GPUs (`ray-service.llm-serve.yaml` aside), so the gang
sizes are what is checked: the head plus each group's clamped `replicas` x `numOfHosts`,
the autoscaling minimum, no gang for a RayJob on an existing cluster; and the samples
written for KubeRay's own batch schedulers are refused under `onConflict: reject`,
naming the key. `examples/raycluster-sample-fits.yaml` is a verbatim copy of
`ray-cluster.sample.yaml`, so the examples tests run it without the module cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "examples" / "fleet.yaml"
GANG_LABEL = "ray.io/gang-scheduling-enabled"
MODULE = "github.com/ray-project/kuberay/ray-operator@v1.5.0"


def _samples() -> Path | None:
    cache = os.environ.get("GOMODCACHE") or str(Path.home() / "go" / "pkg" / "mod")
    path = Path(cache) / MODULE / "config" / "samples"
    return path if path.is_dir() else None


SAMPLES = _samples()
pytestmark = pytest.mark.skipif(
    SAMPLES is None, reason=f"{MODULE} not in the Go module cache (build.sh kuberay fetches it)"
)


def check(sample: str, *extra: str) -> tuple[int, dict[str, dict[str, object]], str]:
    assert SAMPLES is not None
    proc = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "check", "--nodes", str(FLEET),
         "-f", str(SAMPLES / sample), "-o", "json", *extra],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    records = {
        str(r["name"]): r for r in json.loads(proc.stdout) if str(r["kind"]).startswith("Ray")
    }
    return proc.returncode, records, proc.stdout


@pytest.mark.parametrize(
    ("sample", "name", "min_member"),
    [
        ("ray-cluster.sample.yaml", "raycluster-kuberay", 2),  # head + replicas 1
        ("ray-job.sample.yaml", "rayjob-sample", 2),
        ("ray-service.sample.yaml", "rayservice-sample", 2),
        # replicas 1 x numOfHosts 2 (a TPU slice) + the head
        ("ray-cluster.tpu-v4-multihost.yaml", "raycluster-tpu-v4-multihost", 3),
        # one 4-GPU worker and the head: the only sample asking GPUs
        ("ray-service.llm-serve.yaml", "ray-serve-llm", 2),
        # autoscaling from minReplicas 0: the head alone, one pod, no gang
        ("ray-cluster.autoscaler.yaml", "raycluster-autoscaler", None),
        # clusterSelector: it runs on a RayCluster that exists and makes none
        ("ray-job.use-existing-raycluster.yaml", "rayjob-use-existing-raycluster", None),
    ],
)
def test_kuberays_samples_are_sized_as_kuberay_sizes_them(
    sample: str, name: str, min_member: int | None
) -> None:
    code, records, out = check(sample)
    assert code == 0, out
    assert records[name]["verdict"] == "admit"
    assert records[name]["minMember"] == min_member, records[name]


@pytest.mark.parametrize(
    ("sample", "name", "key"),
    [
        ("ray-cluster.scheduler-plugins.yaml", "test-podgroup-0", GANG_LABEL),
        ("ray-cluster.yunikorn-scheduler.yaml", "test-yunikorn-0", GANG_LABEL),
        ("ray-cluster.kai-scheduler.yaml", "raycluster-sample", "kai.scheduler/queue"),
    ],
)
def test_samples_for_kuberays_own_batch_schedulers_conflict_naming_the_key(
    tmp_path: Path, sample: str, name: str, key: str
) -> None:
    assert check(sample)[0] == 0  # onConflict: skip, the default, leaves them to it
    config = tmp_path / "gangkeeper.yaml"
    config.write_text("onConflict: reject\n")
    code, records, out = check(sample, "--config", str(config))
    assert code == 1, out
    assert records[name]["verdict"] == "reject"
    assert key in str(records[name]["reason"]), records[name]
