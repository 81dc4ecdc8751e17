"""KubeRay's ray-operator as a sandbox neighbour: real RayCluster, RayJob, RayService
controllers (v1.5.0).

The binary is the module's root package (`ray-operator/main.go`), built by
`deploy/sandbox/build.sh kuberay` with its CRDs (`config/crd/bases`). It runs only
when `--components` names it: it reconciles every RayCluster in every namespace and
re-lists on a timer, CPU that every other e2e test would pay for on two cores, and
only the Ray tests need it.

How it is run, read from `main.go` of v1.5.0 (flags only, no `--config` file):

- without its webhook: `main.go` sets up the RayCluster validating webhook only when
  the environment has `ENABLE_WEBHOOKS=true`; the sandbox removes that variable, so
  gangkeeper's webhooks are the only ones a RayCluster meets here;
- `--enable-leader-election=false` (one replica: no Lease writes);
- `--metrics-addr` and `--health-probe-bind-address` on free loopback ports (the
  defaults, `:8080` and `:8082`, bind every interface);
- no `--batch-scheduler`: KubeRay's own gang integrations stay off, so the pods it
  creates carry none of the keys gangkeeper's `onConflict` rule looks for;
- the admin kubeconfig through `KUBECONFIG` (controller-runtime's
  `ctrl.GetConfigOrDie`), as the other controller managers get it.

Its dashboard client (RayJob status, `utils.GetRayDashboardClientFunc`) dials
`<head service>.<namespace>.svc.cluster.local:8265`, which would send a DNS query
for that name to the machine's resolver every few seconds. Its `http.Client` uses
Go's default transport, which honours `HTTP(S)_PROXY`: both point at a loopback
port nothing listens on, so those calls fail at once on 127.0.0.1 and no name is
looked up; requests to 127.0.0.1 (the API server) are never proxied. Under kwok no
Ray process runs anyway, and neither does the autoscaler sidecar KubeRay adds to an
autoscaling cluster's head.

May touch: the process it starts through `Processes`, and the API server through the
sandbox's kubectl (the CRDs).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from .binaries import BUILD_COMMAND, BinariesMissing, cache_root
from .kubectl import Kubectl
from .processes import Processes, free_port
from .waiting import http_ok, wait_until

#: Pinned by deploy/sandbox/kuberay/go.mod (a test keeps the two in step).
KUBERAY_VERSION = "v1.5.0"
KUBERAY = "kuberay"
BINARY = "ray-operator"
CRD_DIR = "config/crd/bases"
CRDS = ("rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io")


def root() -> Path:
    return cache_root() / f"{KUBERAY}-{KUBERAY_VERSION}"


def binary() -> Path:
    return root() / "bin" / BINARY


def missing() -> list[str]:
    """What `build.sh kuberay` has not built yet (empty when all is there)."""
    crds = root() / CRD_DIR
    out = [] if os.access(binary(), os.X_OK) else [f"{KUBERAY} ({binary()})"]
    return out + ([] if crds.is_dir() else [f"{KUBERAY} ({crds})"])


def operator_env(kubeconfig: Path, dead_proxy: str) -> dict[str, str]:
    """The operator's environment: the sandbox's, without ENABLE_WEBHOOKS."""
    env = {k: v for k, v in os.environ.items() if k != "ENABLE_WEBHOOKS"}
    env.update(
        KUBECONFIG=str(kubeconfig),
        HTTP_PROXY=dead_proxy,
        HTTPS_PROXY=dead_proxy,
        NO_PROXY="127.0.0.1,localhost",
        # One core's worth: the sandbox's API server and scheduler share the other.
        GOMAXPROCS="1",
    )
    for lower in ("http_proxy", "https_proxy", "no_proxy"):
        env.pop(lower, None)  # Go reads the upper-case names first; keep one source
    return env


def established(kubectl: Kubectl) -> bool:
    """Whether KubeRay's CRDs are Established (False while one has no conditions yet)."""
    done = kubectl.run(
        "wait", "--for=condition=Established", "--timeout=10s",
        *(f"crd/{c}" for c in CRDS), check=False,
    )  # fmt: skip
    return done.returncode == 0


def start_kuberay(processes: Processes, kubectl: Kubectl, *, deadline: float) -> int:
    """Install KubeRay's CRDs, run the operator, wait for its /readyz.

    Returns its health port."""
    if missing():
        raise BinariesMissing(
            f"sandbox component not built: {', '.join(missing())}; build it with "
            f"`{BUILD_COMMAND} {KUBERAY}` (needs Go; cached, a second run does nothing)"
        )
    crds = root() / CRD_DIR
    # Server-side: the RayCluster CRD is too large for client-side apply's annotation.
    kubectl.must("apply", "--server-side", "-f", str(crds))
    # Retried: `kubectl wait` right after the apply fails while a CRD has no
    # status.conditions yet.
    wait_until(
        processes, f"{KUBERAY} (CRDs Established)", functools.partial(established, kubectl),
        deadline,
    )
    health = free_port()
    argv = [
        str(binary()),
        f"--metrics-addr=127.0.0.1:{free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{health}",
        "--enable-leader-election=false",
        "--log-stdout-encoder=console",
    ]
    dead_proxy = f"http://127.0.0.1:{free_port()}"
    processes.start(KUBERAY, argv, env=operator_env(kubectl.kubeconfig, dead_proxy))
    wait_until(
        processes,
        f"{KUBERAY} (readyz)",
        functools.partial(http_ok, f"http://127.0.0.1:{health}/readyz", None),
        deadline,
    )
    return health
