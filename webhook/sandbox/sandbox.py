"""A throwaway Kubernetes control plane on loopback, with gangkeeper registered.

`Sandbox(dir).up(...)` starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and gangkeeper as real processes on free 127.0.0.1 ports (admission,
`serve --no-controller`, and the gang controller, `serve --controller-only`, as two
processes the way the shipped Deployments run them; one `serve` with
`single_process=True`),
creates fake GPU Nodes from a fleet file, installs the CRDs of the workload kinds
gangkeeper recognises, opts the `default` namespace in, registers gangkeeper's
webhooks from the manifests `gangkeeper manifests --url ... --ca-bundle ...`
renders, and returns while everything keeps running. `down()` stops the processes
(found through PID files, so from any process) and removes the state.

May touch: the sandbox directory (PKI, kubeconfigs, etcd data, logs, PID files),
processes it started, and the API server it started. Never another address than
127.0.0.1.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from gangkeeper.policies.names import APP_NAME, DEFAULT_NAMESPACE, ENABLED_LABEL

from . import kueue, neighbours, registration, serve_processes
from .binaries import Binaries, find_binaries
from .control_plane import SERVICE_IP, ControlPlane, Ports, SchedulerClient
from .devices import FLEET_KINDS, publish, split_fleet
from .errors import SandboxError
from .karpenter import KARPENTER
from .kubeconfigs import Identities, write_identities
from .kubectl import Kubectl
from .neighbour_startup import start_neighbours
from .neighbours import ALL_COMPONENTS, JOBSET, KWOK, LWS, SCHEDULER_PLUGINS, TRAINER
from .nodes import create_nodes, fleet_of, nodes_ready
from .pki import create_pki
from .processes import Processes
from .serve_processes import CONTROLLER_PROCESS as CONTROLLER_PROCESS
from .waiting import client_context, http_ok, wait_until

_DATA = resources.files("gangkeeper.webhook.sandbox") / "data"
#: The sample fleet (`examples/fleet.yaml`, shipped inside the package).
DEFAULT_FLEET = Path(str(_DATA / "fleet.yaml"))
#: CRDs of the kinds gangkeeper reads whose controllers the sandbox does not run
#: (JobSet's, LeaderWorkerSet's, Trainer's and the scheduler-plugins PodGroup come
#: from their modules: `neighbours.py`).
CRD_DIR = Path(str(_DATA / "crds"))

#: GenericWorkload serves the native gang API (scheduling.k8s.io Workload/PodGroup)
#: and turns on the scheduler's GangScheduling plugin; beta in 1.37, off by default.
DEFAULT_FEATURE_GATES: Mapping[str, bool] = {"GenericWorkload": True}
#: Opted in so that `kubectl apply -f examples/...` (namespace default) is gang-checked.
OPTED_IN_NAMESPACE = "default"
#: gangkeeper's own namespace, and the ServiceAccount its install manifests create and
#: bind there (its identity here).
GANGKEEPER_NAMESPACE = DEFAULT_NAMESPACE
GANGKEEPER_ACCOUNT = APP_NAME
GANGKEEPER_USER = f"system:serviceaccount:{GANGKEEPER_NAMESPACE}:{GANGKEEPER_ACCOUNT}"
STATE_FILE = "sandbox.json"
PORT_ATTEMPTS = 3
WEBHOOK_PROBE_SECONDS = 30.0
#: Everything `up` creates inside the directory; `down` removes exactly these.
_OWNED = (
    STATE_FILE,
    "pki",
    "admission",
    "etcd-data",
    "kubeconfigs",
    "gangkeeper-certs",
    registration.CONFIG_FILE,
    "kwok.yaml",
    JOBSET,
    LWS,
    TRAINER,
    SCHEDULER_PLUGINS,
    KARPENTER,
    kueue.KUEUE,
    "logs",
    "pids",
)


@dataclass(frozen=True)
class SandboxInfo:
    """What a user or a test needs to talk to a running sandbox."""

    directory: Path
    kubeconfig: Path
    server: str
    gangkeeper_url: str | None
    nodes: tuple[str, ...]
    startup_seconds: float
    #: The gang controller's /healthz and /metrics (gangkeeper_url in single-process mode).
    controller_url: str | None = None


class Sandbox:
    """One sandbox directory: its processes, PKI and cluster state."""

    def __init__(
        self,
        directory: Path | str,
        *,
        binaries: Binaries | None = None,
        feature_gates: Mapping[str, bool] = DEFAULT_FEATURE_GATES,
        log: Callable[[str], None] | None = None,
        karpenter_feature_gates: str = "",
        scheduler_client: SchedulerClient | None = None,
        kueue_config: Mapping[str, Any] | None = None,
    ) -> None:
        """`karpenter_feature_gates`: Karpenter's FEATURE_GATES (`CapacityBuffer=true`)
        when the `karpenter` component runs; empty keeps its defaults.
        `scheduler_client`: kube-scheduler's client rate limit (None: its defaults).
        `kueue_config`: keys added to Kueue's Configuration when the `kueue` component
        runs (`waitForPodsReady`, ...; `kueue.configuration`)."""
        self.scheduler_client = scheduler_client
        kueue.check_extra(kueue_config)  # refused here, before anything starts
        self.kueue_config = dict(kueue_config or {})
        self.directory = Path(directory).resolve()
        self.karpenter_feature_gates = karpenter_feature_gates
        self._binaries = binaries
        self.feature_gates = dict(feature_gates)
        self.processes = Processes(self.directory)
        self._log = log or (lambda _msg: None)

    # -- paths and state ---------------------------------------------------------

    @property
    def binaries(self) -> Binaries:
        if self._binaries is None:
            self._binaries = find_binaries()
        return self._binaries

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfigs" / "admin.kubeconfig"

    def state(self) -> dict[str, Any]:
        """The recorded state of a sandbox that was brought up, or {} if none."""
        try:
            data: dict[str, Any] = json.loads((self.directory / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return data

    def running(self) -> bool:
        return bool(self.state()) and self.processes.alive("kube-apiserver")

    # -- lifecycle -----------------------------------------------------------------

    def up(
        self,
        fleet: Path | None = DEFAULT_FLEET,
        backend: str | None = None,
        config: Path | None = None,
        *,
        node_count: int | None = None,
        gangkeeper: bool = True,
        components: Sequence[str] = ALL_COMPONENTS,
        timeout: float = 180.0,
        single_process: bool = False,
    ) -> SandboxInfo:
        """Start everything and return once the cluster and gangkeeper are ready.

        gangkeeper runs as two processes, admission (`gangkeeper`) and the gang
        controller (`gangkeeper-controller`), unless `single_process`.

        `node_count` replaces the fleet with that many generated 8-GPU Nodes.
        `components` are the neighbours to run beside the control plane (kwok, the
        JobSet, LeaderWorkerSet and Trainer controllers, the scheduler-plugins
        scheduler; default all). Without kwok, Nodes are
        made Ready by the sandbox itself and pods bound to them never start.

        On failure the processes started so far are stopped (their logs stay) and
        SandboxError names the component and its log file.
        """
        if self.running():
            raise SandboxError(
                f"a sandbox is already running in {self.directory}; "
                f"run `gangkeeper sandbox down --dir {self.directory}` first"
            )
        started = time.monotonic()
        deadline = started + timeout
        binaries = self.binaries
        components = neighbours.parse_components(",".join(components))
        neighbours.require_built(components)
        if not CRD_DIR.is_dir():
            raise SandboxError(
                f"CRDs not found at {CRD_DIR}: the sandbox runs from a gangkeeper checkout "
                "installed with `pip install -e .`"
            )
        if node_count is not None:
            fleet_nodes: list[Mapping[str, Any]] = list(fleet_of(node_count))
        else:
            fleet_nodes = _load_fleet(fleet) if fleet is not None else []
        attempt = 1
        while True:
            # Leftovers of a sandbox whose API server died (or of the previous
            # attempt): stop them before reusing the directory.
            self.processes.stop_all()
            self._remove_state()
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                return self._up(
                    binaries,
                    fleet_nodes,
                    backend=backend,
                    config=config,
                    gangkeeper=gangkeeper,
                    single_process=single_process,
                    components=components,
                    started=started,
                    deadline=deadline,
                )
            except SandboxError as e:
                self.processes.stop_all()
                # A free port can be taken by another process between our probe and
                # the component's bind; new ports fix that, anything else is real.
                if "address already in use" not in str(e) or attempt == PORT_ATTEMPTS:
                    raise
                attempt += 1
                self._log(f"a port was taken meanwhile, retrying with new ports: {e}")
            except BaseException:
                self.processes.stop_all()
                raise

    def _up(
        self,
        binaries: Binaries,
        fleet_nodes: list[Mapping[str, Any]],
        *,
        backend: str | None,
        config: Path | None,
        gangkeeper: bool,
        single_process: bool,
        components: Sequence[str],
        started: float,
        deadline: float,
    ) -> SandboxInfo:
        ports = Ports()
        plane = ControlPlane(
            self.processes, self.directory, binaries, self.feature_gates,
            scheduler_client=self.scheduler_client,
        )
        pki = create_pki(
            self.directory / "pki",
            service_ip=SERVICE_IP,
            gangkeeper_service_account=(GANGKEEPER_NAMESPACE, GANGKEEPER_ACCOUNT),
        )
        server = f"https://127.0.0.1:{ports.apiserver}"
        ids = write_identities(self.identities, server, pki, GANGKEEPER_USER)
        admin = ids.admin

        self._log(f"starting etcd on 127.0.0.1:{ports.etcd_client}")
        plane.start_etcd(ports)
        self._wait(
            "etcd",
            lambda: http_ok(f"http://127.0.0.1:{ports.etcd_client}/health", None),
            deadline,
        )
        self._log(f"starting kube-apiserver on {server}")
        plane.start_apiserver(ports, pki)
        tls = client_context(pki.ca.cert, pki.admin)
        self._wait("kube-apiserver", lambda: http_ok(f"{server}/readyz", tls), deadline)

        self._log("starting kube-controller-manager and kube-scheduler")
        plane.start_controller_manager(ports, pki, ids.controller_manager)
        plane.start_scheduler(ports, ids.scheduler)

        self._install_crds()
        kubectl = self.cli
        start_neighbours(
            self.processes,
            self.directory,
            kubectl,
            components,
            ca=pki.ca.cert,
            serving=pki.webhooks,
            deadline=deadline,
            log=self._log,
            karpenter_gates=self.karpenter_feature_gates,
            kueue_config=self.kueue_config,
        )
        kubectl.must(
            "label", "namespace", OPTED_IN_NAMESPACE, f"{ENABLED_LABEL}=true", "--overwrite"
        )
        if gangkeeper:
            registration.install_rbac(kubectl, GANGKEEPER_NAMESPACE, backend)
        else:
            kubectl.must("create", "namespace", GANGKEEPER_NAMESPACE)

        from kubernetes import client
        from kubernetes import config as kube_config

        api = kube_config.new_client_from_config(config_file=str(admin))  # type: ignore[no-untyped-call]
        try:
            core = client.CoreV1Api(api)
            node_entries, device_objects = split_fleet(fleet_nodes)
            self._log(f"creating {len(node_entries)} nodes")
            nodes = create_nodes(core, node_entries, kwok=KWOK in components)
            # What a DRA driver would publish for these nodes (`devices`).
            publish(api, device_objects, log=self._log)
            if KWOK in components:
                self._wait("kwok (nodes Ready)", lambda: not nodes_ready(core, nodes), deadline)
            # Pods are refused until the namespace's default ServiceAccount exists.
            self._wait(
                "kube-controller-manager (default ServiceAccount)",
                lambda: _has_default_sa(core, OPTED_IN_NAMESPACE),
                deadline,
            )
        finally:
            api.close()

        state: dict[str, Any] = {
            "server": server,
            "kubeconfig": str(admin),
            "ports": vars(ports),
            "nodes": nodes,
            "backend": backend,
            "components": list(components),
        }
        if gangkeeper:
            serve_config = registration.config_file(self.directory, backend, config)
            state.update(serve_processes.serve_state(
                ports, kubeconfig=self.gangkeeper_kubeconfig,
                cert_dir=self.gangkeeper_cert_dir, config=serve_config,
                single_process=single_process,
            ))
            gangkeeper_url = state["gangkeeper_url"]
            self._write_state(state)
            self.start_gangkeeper(deadline=deadline)
            registration.register_webhooks(
                kubectl, gangkeeper_url, self.gangkeeper_cert_dir / "ca.crt", backend,
                serve_config,
            )
            self._wait(
                "gangkeeper (called by the API server)",
                functools.partial(registration.webhook_called, kubectl, OPTED_IN_NAMESPACE),
                min(deadline, time.monotonic() + WEBHOOK_PROBE_SECONDS),
            )
        else:
            self._write_state(state)
        return SandboxInfo(
            directory=self.directory,
            kubeconfig=admin,
            server=server,
            gangkeeper_url=state.get("gangkeeper_url"),
            nodes=tuple(nodes),
            startup_seconds=time.monotonic() - started,
            controller_url=state.get("gangkeeper_controller_url", state.get("gangkeeper_url")),
        )

    @staticmethod
    def up_steps(
        components: Sequence[str], gangkeeper: bool = True, single_process: bool = False
    ) -> int:
        """How many progress messages `up` logs (a retry after a port clash adds more):
        etcd, kube-apiserver, controller-manager + scheduler, CRDs, one per neighbour
        (two for scheduler-plugins: its scheduler and its controller), nodes, and
        gangkeeper (two: admission and the controller, unless `single_process`). Kept
        in step with the `_log` calls of `_up` and what it calls, which the README's
        sandbox test counts."""
        extra = 1 if SCHEDULER_PLUGINS in components else 0
        gangkeepers = (1 if single_process else 2) if gangkeeper else 0
        return 5 + len(components) + extra + gangkeepers

    def down(self) -> None:
        """Stop every recorded process and remove what `up` created in the directory."""
        self.processes.stop_all()
        self._remove_state()
        # The directory itself goes only if nothing of the user's is left in it.
        if self.directory.is_dir() and not any(self.directory.iterdir()):
            self.directory.rmdir()

    @property
    def identities(self) -> Identities:
        kubeconfigs = self.directory / "kubeconfigs"
        return Identities(
            admin=self.kubeconfig,
            controller_manager=kubeconfigs / "controller-manager.kubeconfig",
            scheduler=kubeconfigs / "scheduler.kubeconfig",
            gangkeeper=self.gangkeeper_kubeconfig,
        )

    def _install_crds(self) -> None:
        """The workload kinds gangkeeper reads: JobSet's and LeaderWorkerSet's as their
        modules ship them, the others from `data/crds`."""
        self._log("installing the CRDs of the kinds gangkeeper reads")
        self.cli.must("apply", "--server-side", "-f", str(CRD_DIR))
        for crds in neighbours.crd_paths():
            how = "-k" if (crds / "kustomization.yaml").is_file() else "-f"
            self.cli.must("apply", "--server-side", how, str(crds))
        self.cli.must(
            "wait", "--for=condition=Established", "--timeout=60s", "crd",
            "-l", "app.kubernetes.io/part-of=gangkeeper-sandbox",
        )  # fmt: skip
        self.cli.must(
            "wait", "--for=condition=Established", "--timeout=60s",
            *(f"crd/{name}" for name in neighbours.served_crds()),
        )  # fmt: skip

    # -- gangkeeper ------------------------------------------------------------------

    @property
    def gangkeeper_cert_dir(self) -> Path:
        return self.directory / "gangkeeper-certs"

    @property
    def gangkeeper_kubeconfig(self) -> Path:
        """gangkeeper's own identity: its ServiceAccount, with the rendered RBAC."""
        return self.directory / "kubeconfigs" / "gangkeeper.kubeconfig"

    @property
    def controller_process(self) -> str:
        """The name of the process that runs the gang controller (and holds the Lease
        when it leads): `gangkeeper-controller`, or `gangkeeper` in single-process mode."""
        return serve_processes.controller_process(self.state())

    @property
    def controller_url(self) -> str:
        """Where the gang controller's /metrics are."""
        return serve_processes.controller_url(self.state())

    def start_gangkeeper(
        self, *, deadline: float | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        """(Re)start gangkeeper's processes (admission, then the controller unless
        single-process) with the recorded arguments (and `extra_args`, for this run
        only); wait for each one's /readyz."""
        serve_processes.start(
            self.processes, self.state(), cert_dir=self.gangkeeper_cert_dir,
            deadline=deadline, extra_args=extra_args, log=self._log,
            state_file=self.directory / STATE_FILE,
        )

    def stop_gangkeeper(self, *, kill: bool = False) -> None:
        """SIGTERM (graceful) or, with `kill`, SIGKILL: a crash, nothing cleaned up.
        Admission and the controller together."""
        serve_processes.stop(self.processes, kill=kill)

    # -- helpers ---------------------------------------------------------------------

    @property
    def cli(self) -> Kubectl:
        """The sandbox's kubectl as its admin."""
        return Kubectl(self.binaries.kubectl, self.kubeconfig)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the sandbox's kubectl against it."""
        return self.cli.run(*args, input=input, check=check)

    def _wait(self, component: str, ready: Callable[[], bool], deadline: float) -> None:
        wait_until(self.processes, component, ready, deadline)

    def _write_state(self, state: Mapping[str, Any]) -> None:
        (self.directory / STATE_FILE).write_text(json.dumps(state, indent=2))

    def _remove_state(self) -> None:
        for name in _OWNED:
            path = self.directory / name
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)


def _load_fleet(path: Path) -> list[Mapping[str, Any]]:
    """Nodes, and the ResourceSlices and DeviceClasses beside them (`devices`)."""
    from gangkeeper.webhook.files.manifests import ManifestError, load_documents

    try:
        docs = load_documents(path)
    except ManifestError as e:
        raise SandboxError(f"fleet file: {e}") from e
    for doc in docs:
        if doc.obj.get("kind") not in FLEET_KINDS:
            raise SandboxError(f"fleet file: {doc.where}: expected kind "
                               f"{', '.join(FLEET_KINDS)}, got {doc.obj.get('kind')}")
    return [doc.obj for doc in docs]


def _has_default_sa(core: Any, namespace: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespaced_service_account("default", namespace)
    except ApiException:
        return False
    return True
