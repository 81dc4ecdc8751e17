"""The sandbox's kube-scheduler with a raised client rate limit (`SchedulerClient`).

Argv and the configuration file only: no process starts (a recording `Processes`).
The benchmark `bench.scheduler_binding` runs the real scheduler with both settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gangkeeper.webhook.sandbox import SchedulerClient
from gangkeeper.webhook.sandbox.binaries import Binaries
from gangkeeper.webhook.sandbox.control_plane import ControlPlane, Ports


class Recorded:
    def __init__(self) -> None:
        self.started: dict[str, list[str]] = {}

    def start(self, name: str, argv: Sequence[str], *args: Any, **kwargs: Any) -> None:
        self.started[name] = list(argv)


def _scheduler_argv(tmp_path: Path, client: SchedulerClient | None) -> list[str]:
    processes = Recorded()
    binaries = Binaries(*(tmp_path / n for n in ("etcd", "api", "kcm", "sched", "kubectl")))
    plane = ControlPlane(processes, tmp_path, binaries, {}, scheduler_client=client)  # type: ignore[arg-type]
    plane.start_scheduler(Ports(), tmp_path / "scheduler.kubeconfig")
    return processes.started["kube-scheduler"]


def test_a_raised_limit_reaches_the_scheduler_through_its_configuration_file(
    tmp_path: Path,
) -> None:
    argv = _scheduler_argv(tmp_path, SchedulerClient(qps=500.0, burst=1000))
    configs = [a.split("=", 1)[1] for a in argv if a.startswith("--config=")]
    assert len(configs) == 1
    config = yaml.safe_load(Path(configs[0]).read_text())
    assert config["kind"] == "KubeSchedulerConfiguration"
    # With --config the scheduler reads these from the file alone, not from flags.
    assert config["clientConnection"] == {
        "kubeconfig": str(tmp_path / "scheduler.kubeconfig"), "qps": 500.0, "burst": 1000,
    }
    assert config["leaderElection"] == {"leaderElect": False}
    assert "--leader-elect=false" not in argv


def test_without_a_limit_the_scheduler_keeps_its_defaults_and_its_flags(tmp_path: Path) -> None:
    argv = _scheduler_argv(tmp_path, None)
    assert not any(a.startswith("--config=") for a in argv)
    assert "--leader-elect=false" in argv
    assert f"--kubeconfig={tmp_path / 'scheduler.kubeconfig'}" in argv
