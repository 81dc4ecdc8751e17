"""Karpenter's kwok provider as a sandbox neighbour: a real autoscaler for GPU pools.

The binary is Karpenter's own `sigs.k8s.io/karpenter/kwok` (the Karpenter controller
with a cloud provider whose "instances" are Node objects that kwok plays), built by
`deploy/sandbox/build.sh karpenter` with Go 1.27 (the module needs ≥ 1.26.9). How it
is run here, read from the module's source (`kwok/main.go`, `kwok/options`,
`pkg/operator/options`):

- the CRDs it ships (`pkg/apis/crds`: NodePool, NodeClaim, NodeOverlay,
  CapacityBuffer; `kwok/apis/crds`: KWOKNodeClass) are applied before it starts, and
  a KWOKNodeClass `default` that NodePools point at;
- `INSTANCE_TYPES_FILE_PATH` names a JSON list of instance types (name, offerings
  with price and zone/capacity-type requirements, architecture, operatingSystems,
  resources) replacing the built-in ones, which have no GPUs: `data/
  karpenter-instance-types.json` offers 8-GPU types;
- one replica, so `DISABLE_LEADER_ELECTION=true`; `HEALTH_PROBE_PORT` and
  `METRICS_PORT` on free ports (it binds them on every interface; nothing but the
  readiness probe on 127.0.0.1 ever calls them);
- the Nodes it creates carry the annotation `kwok.x-k8s.io/node: fake`, the one the
  sandbox's kwok manages, so kwok makes them Ready with the sandbox's Stages.
  Their `kubernetes.io/hostname` label is the NodeClaim's name, not the Node's.

May touch: the sandbox directory (the instance-types file), the process it starts
through `Processes`, and the API server through the sandbox's kubectl.
"""

from __future__ import annotations

import functools
import os
from importlib import resources
from pathlib import Path

from .binaries import BUILD_COMMAND, BinariesMissing, cache_root
from .kubectl import Kubectl
from .processes import Processes, free_port
from .waiting import http_ok, wait_until

#: Pinned by deploy/sandbox/karpenter/go.mod (a test keeps the two in step).
KARPENTER_VERSION = "v1.15.0"
KARPENTER = "karpenter"
#: The folders build.sh copies from the module.
CRD_DIRS = ("pkg/apis/crds", "kwok/apis/crds")
CRDS = (
    "nodepools.karpenter.sh",
    "nodeclaims.karpenter.sh",
    "kwoknodeclasses.karpenter.kwok.sh",
)
#: The KWOKNodeClass every sandbox NodePool points at.
NODE_CLASS = "default"
INSTANCE_TYPES = "karpenter-instance-types.json"


def root() -> Path:
    return cache_root() / f"{KARPENTER}-{KARPENTER_VERSION}"


def binary() -> Path:
    return root() / "bin" / "karpenter-kwok"


def missing() -> list[str]:
    """What `build.sh karpenter` has not built yet (empty when all is there)."""
    out = [] if os.access(binary(), os.X_OK) else [f"{KARPENTER} ({binary()})"]
    out += [f"{KARPENTER} ({root() / d})" for d in CRD_DIRS if not (root() / d).is_dir()]
    return out


def node_class() -> str:
    return (
        "apiVersion: karpenter.kwok.sh/v1alpha1\n"
        "kind: KWOKNodeClass\n"
        f"metadata:\n  name: {NODE_CLASS}\n"
    )


def start_karpenter(
    processes: Processes,
    directory: Path,
    kubectl: Kubectl,
    *,
    deadline: float,
    feature_gates: str = "",
) -> int:
    """Install the CRDs and the node class, run Karpenter, wait for its /readyz.

    Returns its health port. `feature_gates` is Karpenter's `FEATURE_GATES`
    (`CapacityBuffer=true`, ...); empty keeps its defaults.
    """
    if missing():
        raise BinariesMissing(
            f"sandbox component not built: {', '.join(missing())}; build it with "
            f"`{BUILD_COMMAND} {KARPENTER}` (needs Go; GOTOOLCHAIN=go1.27.3 is set by build.sh)"
        )
    for crds in CRD_DIRS:
        kubectl.must("apply", "--server-side", "-f", str(root() / crds))
    kubectl.must(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{c}" for c in CRDS)
    )
    kubectl.must("apply", "--server-side", "-f", "-", input=node_class())
    work = directory / KARPENTER
    work.mkdir(parents=True, exist_ok=True)
    types = work / INSTANCE_TYPES
    source = resources.files("gangkeeper.webhook.sandbox").joinpath(f"data/{INSTANCE_TYPES}")
    types.write_text(source.read_text())
    health = free_port()
    env = {
        **os.environ,
        "KUBECONFIG": str(kubectl.kubeconfig),
        "INSTANCE_TYPES_FILE_PATH": str(types),
        "DISABLE_LEADER_ELECTION": "true",
        "HEALTH_PROBE_PORT": str(health),
        "METRICS_PORT": str(free_port()),
        "LOG_LEVEL": "info",
        # Its default QPS (200, burst 300) is for a real cluster; the sandbox's API
        # server shares two cores with everything else.
        "KUBE_CLIENT_QPS": "50",
        "KUBE_CLIENT_BURST": "100",
        # GOMAXPROCS: Karpenter's scheduling simulation would otherwise take both cores.
        "GOMAXPROCS": "1",
    }
    if feature_gates:
        env["FEATURE_GATES"] = feature_gates
    processes.start(KARPENTER, [str(binary())], env=env)
    wait_until(
        processes,
        f"{KARPENTER} (readyz)",
        functools.partial(http_ok, f"http://127.0.0.1:{health}/readyz", None),
        deadline,
    )
    return health
