"""Bringing the neighbours up in order: kwok, the scheduler-plugins scheduler and
controller, then each controller manager with its webhooks registered and answering,
then Karpenter, Kueue and KubeRay (each when asked for) once their CRDs are served.

May touch: the processes it starts (through `Processes`), the sandbox directory, and
the API server through the sandbox's kubectl. What each neighbour is and how it is
launched is `neighbours.py`'s; this module only sequences and waits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from . import karpenter, kuberay, kueue, neighbours
from .karpenter import KARPENTER
from .kubectl import Kubectl
from .kuberay import KUBERAY
from .kueue import KUEUE
from .neighbours import CONTROLLERS, KWOK, SCHEDULER_PLUGINS
from .pki import KeyPair
from .processes import Processes
from .waiting import http_ok, unverified_context, wait_until


def start_neighbours(
    processes: Processes,
    directory: Path,
    kubectl: Kubectl,
    components: Sequence[str],
    *,
    ca: Path,
    serving: KeyPair,
    deadline: float,
    log: Callable[[str], None],
    karpenter_gates: str = "",
    kueue_config: Mapping[str, Any] | None = None,
) -> None:
    """kwok, then the controllers with their webhooks registered and answering.
    `kueue_config`: keys added to Kueue's Configuration (`kueue.configuration`)."""
    kubeconfig = kubectl.kubeconfig
    if KWOK in components:
        log("starting kwok")
        neighbours.start_kwok(processes, directory, kubeconfig)
    scheduler_port = podgroup_port = None
    if SCHEDULER_PLUGINS in components:
        log(f"starting the scheduler-plugins scheduler {neighbours.SCHEDULER_PLUGINS_VERSION}")
        scheduler_port = neighbours.start_coscheduling_scheduler(processes, directory, kubeconfig)
        log("starting the scheduler-plugins controller (PodGroup status)")
        podgroup_port = neighbours.start_podgroup_controller(processes, kubeconfig)
    running = []
    for name in components:
        controller = CONTROLLERS.get(name)
        if controller is None:
            continue
        log(f"starting the {name} controller {controller.version}")
        running.append(
            neighbours.start_controller(processes, controller, directory, kubeconfig, serving)
        )
    for started in running:
        readyz = f"http://127.0.0.1:{started.health_port}/readyz"
        wait_until(
            processes,
            f"{started.controller.name} (readyz)",
            functools.partial(http_ok, readyz, None),
            deadline,
        )
        configurations = neighbours.webhook_configurations(
            started, ca.read_bytes(), kubectl.kustomize
        )
        kubectl.must(
            "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(configurations)
        )
        for manifest in started.controller.manifests:
            # Through the controller's own webhooks, which the API server may take a
            # moment to call after registration: retried until the deadline.
            path = started.controller.root / manifest
            wait_until(
                processes,
                f"{started.controller.name} (applying {path.name})",
                functools.partial(kubectl.applied, path),
                deadline,
            )
    if KARPENTER in components:
        log(f"starting Karpenter's kwok provider {karpenter.KARPENTER_VERSION}")
        karpenter.start_karpenter(
            processes, directory, kubectl, deadline=deadline, feature_gates=karpenter_gates
        )
    if KUEUE in components:
        log(f"starting the Kueue controller manager {kueue.KUEUE_VERSION}")
        kueue.start_kueue(processes, directory, kubectl, deadline=deadline, extra=kueue_config)
    if KUBERAY in components:
        log(f"starting KubeRay's ray-operator {kuberay.KUBERAY_VERSION}")
        kuberay.start_kuberay(processes, kubectl, deadline=deadline)
    if scheduler_port is not None:
        healthz = f"https://127.0.0.1:{scheduler_port}/healthz"
        wait_until(
            processes,
            f"{SCHEDULER_PLUGINS} (healthz)",
            functools.partial(http_ok, healthz, unverified_context()),
            deadline,
        )
    if podgroup_port is not None:
        wait_until(
            processes,
            f"{neighbours.SCHEDULER_PLUGINS_CONTROLLER} (readyz)",
            functools.partial(http_ok, f"http://127.0.0.1:{podgroup_port}/readyz", None),
            deadline,
        )
