"""The components users run beside gangkeeper, started in the sandbox as real processes.

- **kwok** plays the kubelet of the sandbox's Nodes: it makes them Ready, keeps
  their heartbeat, and takes pods bound to them through Running, Ready and (for pods
  with a duration) Succeeded, following the Stages in `data/kwok-stages.yaml`.
- **JobSet** and **LeaderWorkerSet** controller managers, with their own admission
  webhooks. Their webhook configurations are the ones each module ships (rendered
  with `kubectl kustomize` from the module's `config/`), pointed at
  `https://127.0.0.1:PORT` with a certificate from the sandbox PKI; their built-in
  certificate rotation is turned off.
- **Kubeflow Trainer**'s controller manager the same way (TrainJob → JobSet), with
  the ClusterTrainingRuntimes its module ships (torch-, deepspeed-, mlx-distributed)
  applied once its webhooks answer.
- **Karpenter**'s kwok provider (`karpenter.py`), only when asked for: it creates
  Nodes for Unschedulable pods under the NodePools a test applies.
- **Kueue**'s controller manager (`kueue.py`), only when asked for: quota and
  admission of Jobs, pods, JobSets, TrainJobs and Ray kinds, with its own webhooks.
  Not in the default set: its pod and TrainJob webhooks would answer for every other
  test's objects (in every sandbox they broke tests/e2e/test_trainer_controller.py)
  and it costs CPU on two cores.
- **KubeRay**'s ray-operator (`kuberay.py`), only when asked for: RayCluster, RayJob
  and RayService become head and worker pods (and a RayJob's submitter Job), with
  its own webhook off. Not in the default set: only the Ray tests need it, and it is
  CPU on two cores.
- the **scheduler-plugins** scheduler as a second scheduler,
  `scheduler-plugins-scheduler`, with the Coscheduling profile of the module's
  `manifests/coscheduling/scheduler-config.yaml`; it runs as the sandbox admin (no
  RBAC of its own, unlike kube-scheduler), beside the stock kube-scheduler; and the
  module's controller (`cmd/controller`), which keeps PodGroup status (phase,
  running, succeeded, failed) as users see it in `kubectl get podgroups`. Neither
  the scheduler nor Trainer nor gangkeeper reads that status; the controller runs so
  that the PodGroups look as they do on a real cluster (it also reconciles
  ElasticQuotas, whose CRD it needs, from `manifests/capacityscheduling`).

Every binary and manifest comes from `deploy/sandbox/build.sh`, which builds each
component from its own wrapper module into the cache beside the control plane
(`<cache>/<component>-<version>/{bin,config}`).

May touch: files in the sandbox directory it is given (configs, certificate copies),
processes it starts through `Processes`, and the API server through the kubectl
callable it is given. Never another address than 127.0.0.1.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from . import karpenter, kuberay, kueue
from .binaries import BUILD_COMMAND, BinariesMissing, cache_root
from .karpenter import KARPENTER
from .kuberay import KUBERAY
from .kueue import KUEUE
from .pki import KeyPair
from .processes import Processes, free_port

#: Versions pinned by the wrapper modules in deploy/sandbox/<component>/go.mod (a test
#: keeps the two in step); the cache folders are named after them.
KWOK_VERSION = "v0.8.0"
JOBSET_VERSION = "v0.11.1"
LWS_VERSION = "v0.7.0"
TRAINER_VERSION = "v2.2.0"
SCHEDULER_PLUGINS_VERSION = "v0.34.1-devel"

#: Nodes whose annotation matches are kwok's to play (`kwok --manage-nodes-with-...`).
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
#: Fake pod IPs (never routed anywhere: nothing but status fields carry them).
KWOK_POD_CIDR = "10.128.0.0/10"
#: Leases renew a node's heartbeat; long, so thousands of nodes cost the 2-core API
#: server little (nothing in the sandbox marks a node unreachable anyway).
KWOK_LEASE_SECONDS = 600

KWOK = "kwok"
JOBSET = "jobset"
LWS = "lws"
TRAINER = "trainer"
SCHEDULER_PLUGINS = "scheduler-plugins"
#: What `sandbox up` starts unless told otherwise, in start order.
ALL_COMPONENTS: tuple[str, ...] = (KWOK, JOBSET, LWS, TRAINER, SCHEDULER_PLUGINS)
#: Every component `--components` takes, in start order. Karpenter is not started
#: unless named: it is a 42 MB Go process polling the whole cluster, which every other
#: e2e test would pay for on two cores, and only the autoscaling tests need it.
#: Kueue neither: its webhooks answer for every TrainJob and every pod of a queue, which
#: broke the Trainer tests when it ran in every sandbox, and it is CPU on two cores.
#: KubeRay neither: it reconciles and re-lists Ray objects on a timer, CPU on two cores
#: that only the Ray tests (tests/e2e/test_kuberay.py, a sandbox of their own) use.
KNOWN_COMPONENTS: tuple[str, ...] = (*ALL_COMPONENTS, KARPENTER, KUEUE, KUBERAY)
#: The schedulerName gangkeeper's coscheduling backend writes (its config default).
COSCHEDULING_SCHEDULER = "scheduler-plugins-scheduler"
#: The module's own example configuration for a Coscheduling scheduler.
COSCHEDULING_CONFIG = "manifests/coscheduling/scheduler-config.yaml"
COSCHEDULING_CRD_DIR = "manifests/coscheduling"
#: The scheduler-plugins controller watches ElasticQuotas too: without their CRD its
#: manager does not start.
ELASTICQUOTA_CRD_DIR = "manifests/capacityscheduling"
#: The process name of the scheduler-plugins controller (PodGroup status).
SCHEDULER_PLUGINS_CONTROLLER = "scheduler-plugins-controller"


@dataclass(frozen=True)
class Controller:
    """A controller-runtime manager with webhooks: how to run and register it."""

    name: str
    version: str
    binary: str
    #: Its config API group (`config.<group>/v1alpha1`, kind Configuration).
    config_group: str
    crd_dir: str
    webhook_dir: str
    #: CRDs it serves, to wait for `Established`.
    crds: tuple[str, ...]
    #: Objects of the module applied once its webhooks answer (Trainer's runtimes).
    manifests: tuple[str, ...] = ()
    #: Whether its Configuration has `webhook.certDir`. Trainer's has not: its
    #: webhook server reads controller-runtime's default `$TMPDIR/k8s-webhook-server/
    #: serving-certs`, so the sandbox points TMPDIR at the controller's folder.
    cert_dir_option: bool = True
    #: The Configuration key that turns its certificate rotation off.
    cert_management_key: str = "internalCertManagement"

    @property
    def root(self) -> Path:
        return cache_root() / f"{self.name}-{self.version}"


JOBSET_CONTROLLER = Controller(
    name=JOBSET,
    version=JOBSET_VERSION,
    binary="jobset-controller",
    config_group="config.jobset.x-k8s.io",
    crd_dir="config/components/crd/bases",
    webhook_dir="config/components/webhook",
    crds=("jobsets.jobset.x-k8s.io",),
)
LWS_CONTROLLER = Controller(
    name=LWS,
    version=LWS_VERSION,
    binary="lws-controller",
    config_group="config.lws.x-k8s.io",
    crd_dir="config/crd/bases",
    webhook_dir="config/webhook",
    crds=("leaderworkersets.leaderworkerset.x-k8s.io",),
)
TRAINER_CONTROLLER = Controller(
    name=TRAINER,
    version=TRAINER_VERSION,
    binary="trainer-controller-manager",
    config_group="config.trainer.kubeflow.org",
    crd_dir="manifests/base/crds",
    webhook_dir="manifests/base/webhook",
    crds=(
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    ),
    manifests=tuple(
        f"manifests/base/runtimes/{name}_distributed.yaml"
        for name in ("torch", "deepspeed", "mlx")
    ),
    cert_dir_option=False,
    cert_management_key="certManagement",
)
CONTROLLERS: Mapping[str, Controller] = {
    c.name: c for c in (JOBSET_CONTROLLER, LWS_CONTROLLER, TRAINER_CONTROLLER)
}


def scheduler_plugins_root() -> Path:
    return cache_root() / f"{SCHEDULER_PLUGINS}-{SCHEDULER_PLUGINS_VERSION}"


def scheduler_plugins_binary() -> Path:
    return scheduler_plugins_root() / "bin" / "scheduler-plugins-scheduler"


def scheduler_plugins_controller_binary() -> Path:
    return scheduler_plugins_root() / "bin" / SCHEDULER_PLUGINS_CONTROLLER


def kwok_binary() -> Path:
    return cache_root() / f"kwok-{KWOK_VERSION}" / "bin" / "kwok"


def parse_components(text: str) -> tuple[str, ...]:
    """`kwok,jobset` as `sandbox up --components` takes it ('' or 'none' for none)."""
    names = [p.strip() for p in text.split(",") if p.strip() and p.strip() != "none"]
    unknown = [n for n in names if n not in KNOWN_COMPONENTS]
    if unknown:
        raise ValueError(
            f"unknown component(s) {', '.join(unknown)}; known: {', '.join(KNOWN_COMPONENTS)}"
        )
    if KARPENTER in names and KWOK not in names:
        # Its Nodes are kwok's to make Ready: without kwok they never become Ready.
        raise ValueError("karpenter needs kwok (it creates Nodes that kwok makes Ready)")
    if (JOBSET in names or LWS in names or TRAINER in names) and KWOK not in names:
        # Their pods would be bound and then sit without a kubelet: never Ready, so
        # JobSet's dependsOn and LeaderWorkerSet's LeaderReady could never proceed.
        raise ValueError(
            "jobset, lws and trainer need kwok (their pods must start and become Ready)"
        )
    if KUBERAY in names and KWOK not in names:
        # Its Ready conditions (RayCluster state `ready`, a RayJob's submitter) need
        # pods that start.
        raise ValueError("kuberay needs kwok (its pods must start and become Ready)")
    if TRAINER in names and JOBSET not in names:
        # A TrainJob becomes a JobSet; without JobSet's controller no pod ever exists.
        raise ValueError("trainer needs jobset (a TrainJob runs as a JobSet)")
    return tuple(n for n in KNOWN_COMPONENTS if n in names)


def require_built(components: Sequence[str]) -> None:
    """BinariesMissing naming the build command when a component is not built.

    The CRDs of JobSet, LeaderWorkerSet, Trainer and the scheduler-plugins PodGroup
    are installed even when their controllers are not started (gangkeeper reads
    those kinds), so their folders are always needed.
    """
    missing = [
        f"{c.name} ({c.root})" for c in CONTROLLERS.values() if not (c.root / c.crd_dir).is_dir()
    ]
    for crds in (COSCHEDULING_CRD_DIR, ELASTICQUOTA_CRD_DIR):
        if not (scheduler_plugins_root() / crds).is_dir():
            missing.append(f"{SCHEDULER_PLUGINS} ({scheduler_plugins_root() / crds})")
    if SCHEDULER_PLUGINS in components:
        for binary in (scheduler_plugins_binary(), scheduler_plugins_controller_binary()):
            if not os.access(binary, os.X_OK):
                missing.append(f"{SCHEDULER_PLUGINS} ({binary})")
    if KWOK in components and not os.access(kwok_binary(), os.X_OK):
        missing.append(f"kwok ({kwok_binary()})")
    if KARPENTER in components:
        missing += karpenter.missing()
    if KUEUE in components:
        missing += kueue.missing()
    if KUBERAY in components:
        missing += kuberay.missing()
    for name in components:
        controller = CONTROLLERS.get(name)
        if controller is not None and not os.access(
            controller.root / "bin" / controller.binary, os.X_OK
        ):
            missing.append(f"{name} ({controller.root / 'bin' / controller.binary})")
    if missing:
        # Karpenter is not in build.sh's default set (it needs the Go 1.27 toolchain).
        command = BUILD_COMMAND
        if KARPENTER in components:
            command += f"` and `{BUILD_COMMAND} {KARPENTER}"
        elif KUEUE in components:
            command += f" {KUEUE}"
        elif KUBERAY in components:
            command += f" {KUBERAY}"
        raise BinariesMissing(
            f"sandbox components not built: {', '.join(sorted(set(missing)))}; build them "
            f"with `{command}` (needs Go; cached, a second run does nothing)"
        )


def crd_paths() -> list[Path]:
    """The CRD folders of the neighbours, as their module versions ship them (a folder
    with a kustomization.yaml is applied with `-k`)."""
    return [c.root / c.crd_dir for c in CONTROLLERS.values()] + [
        scheduler_plugins_root() / crds / "crd.yaml"
        for crds in (COSCHEDULING_CRD_DIR, ELASTICQUOTA_CRD_DIR)
    ]


def served_crds() -> list[str]:
    return [name for c in CONTROLLERS.values() for name in c.crds] + [
        "podgroups.scheduling.x-k8s.io",
        "elasticquotas.scheduling.x-k8s.io",
    ]


def coscheduling_config(kubeconfig: Path) -> dict[str, Any]:
    """The module's Coscheduling KubeSchedulerConfiguration, as a second scheduler.

    Kept from the module: the plugin set (Coscheduling at every extension point,
    its queue sort instead of the default) and its args. Changed: the profile's
    schedulerName (the module's example replaces the default scheduler; here
    kube-scheduler stays), the kubeconfig, and no leader election (one replica).
    """
    path = scheduler_plugins_root() / COSCHEDULING_CONFIG
    try:
        config: dict[str, Any] = yaml.safe_load(path.read_text())
    except OSError as e:
        raise BinariesMissing(f"{path}: {e}; rebuild with `{BUILD_COMMAND}`") from e
    config["leaderElection"] = {"leaderElect": False}
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    [profile] = config["profiles"]
    profile["schedulerName"] = COSCHEDULING_SCHEDULER
    return config


def start_coscheduling_scheduler(processes: Processes, directory: Path, kubeconfig: Path) -> int:
    """Run the scheduler-plugins scheduler; returns its secure port (for /healthz)."""
    root = directory / SCHEDULER_PLUGINS
    root.mkdir(parents=True, exist_ok=True)
    config_path = root / "scheduler-config.yaml"
    config_path.write_text(yaml.safe_dump(coscheduling_config(kubeconfig), sort_keys=False))
    port = free_port()
    processes.start(
        SCHEDULER_PLUGINS,
        [
            str(scheduler_plugins_binary()),
            f"--config={config_path}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={root / 'serving-certs'}",
            "--v=1",
        ],
    )
    return port


def start_podgroup_controller(processes: Processes, kubeconfig: Path) -> int:
    """Run the scheduler-plugins controller; returns its probe port (for /readyz).

    One replica, so no leader election (its Lease would live in kube-system);
    "0" turns controller-runtime's metrics server off."""
    port = free_port()
    processes.start(
        SCHEDULER_PLUGINS_CONTROLLER,
        [
            str(scheduler_plugins_controller_binary()),
            "--metricsAddr=0",
            f"--probeAddr=127.0.0.1:{port}",
            "--enableLeaderElection=false",
        ],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
    )
    return port


def start_kwok(processes: Processes, directory: Path, kubeconfig: Path) -> None:
    """Run the kwok controller on the sandbox's annotated Nodes, with our Stages."""
    config = directory / "kwok.yaml"
    stages = resources.files("gangkeeper.webhook.sandbox").joinpath("data/kwok-stages.yaml")
    config.write_text(stages.read_text())
    key, value = KWOK_NODE_ANNOTATION
    processes.start(
        KWOK,
        [
            str(kwok_binary()),
            f"--kubeconfig={kubeconfig}",
            f"--config={config}",
            f"--manage-nodes-with-annotation-selector={key}={value}",
            f"--cidr={KWOK_POD_CIDR}",
            f"--node-lease-duration-seconds={KWOK_LEASE_SECONDS}",
            # No --server-address: kwok's own server (logs, exec) stays off.
        ],
    )


@dataclass(frozen=True)
class RunningController:
    """Where a started controller listens: what registration and readiness need."""

    controller: Controller
    webhook_port: int
    health_port: int


def start_controller(
    processes: Processes,
    controller: Controller,
    directory: Path,
    kubeconfig: Path,
    serving: KeyPair,
) -> RunningController:
    """Start one controller manager, its webhook server on 127.0.0.1, no cert rotation."""
    root = directory / controller.name
    cert_dir = (
        root / "serving-certs"
        if controller.cert_dir_option
        else root / "tmp" / "k8s-webhook-server" / "serving-certs"
    )
    cert_dir.mkdir(parents=True, exist_ok=True)
    # controller-runtime's webhook server reads tls.crt/tls.key from its cert dir.
    shutil.copyfile(serving.cert, cert_dir / "tls.crt")
    shutil.copyfile(serving.key, cert_dir / "tls.key")
    running = RunningController(controller, webhook_port=free_port(), health_port=free_port())
    config: dict[str, Any] = {
        "apiVersion": f"{controller.config_group}/v1alpha1",
        "kind": "Configuration",
        # One replica: nothing to elect, and no Lease writes on the shared 2 cores.
        "leaderElection": {"leaderElect": False},
        # The sandbox PKI issued the serving certificate; the built-in rotator would
        # look for a Secret and a Service that do not exist here.
        controller.cert_management_key: {"enable": False},
        "webhook": {"port": running.webhook_port, "host": "127.0.0.1"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{running.health_port}"},
        # "0" turns controller-runtime's metrics server off.
        "metrics": {"bindAddress": "0"},
    }
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    if controller.cert_dir_option:
        config["webhook"]["certDir"] = str(cert_dir)
    else:
        env["TMPDIR"] = str(root / "tmp")
    config_path = root / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    processes.start(
        controller.name,
        [str(controller.root / "bin" / controller.binary), f"--config={config_path}"],
        env=env,
    )
    return running


def webhook_configurations(
    running: RunningController, ca_bundle: bytes, kustomize: Callable[[Path], str]
) -> list[dict[str, Any]]:
    """The controller's own webhook configurations, pointed at its loopback server.

    `kustomize` renders a kustomization directory (the sandbox's `kubectl kustomize`),
    so the patches each module applies (JobSet's pod webhooks only see JobSet pods)
    are kept exactly. Names get the component's prefix, as its release manifests do,
    because JobSet and LeaderWorkerSet both call theirs `mutating-webhook-configuration`.
    """
    controller = running.controller
    rendered = kustomize(controller.root / controller.webhook_dir)
    bundle = base64.b64encode(ca_bundle).decode()
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(rendered):
        if not isinstance(doc, dict) or doc.get("kind") not in (
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ):
            continue
        doc["metadata"]["name"] = f"{controller.name}-{doc['metadata']['name']}"
        for webhook in doc.get("webhooks") or []:
            path = (webhook.get("clientConfig") or {}).get("service", {}).get("path", "/")
            webhook["clientConfig"] = {
                "url": f"https://127.0.0.1:{running.webhook_port}{path}",
                "caBundle": bundle,
            }
        out.append(doc)
    if not out:
        raise BinariesMissing(
            f"no webhook configurations in {controller.root / controller.webhook_dir}; "
            f"rebuild with `{BUILD_COMMAND}`"
        )
    return out
