"""A throwaway Kubernetes control plane on loopback, with gangkeeper registered.

`Sandbox(dir).up(...)` starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and `gangkeeper serve` as real processes on free 127.0.0.1 ports,
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
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from gangkeeper.policies.names import (
    APP_NAME,
    DEFAULT_NAMESPACE,
    ENABLED_LABEL,
    GANG_NAME_ANNOTATION,
    GATE,
    MIN_MEMBER_ANNOTATION,
)

from . import neighbours
from .binaries import Binaries, find_binaries
from .control_plane import SERVICE_IP, ControlPlane, Ports
from .neighbours import (
    ALL_COMPONENTS,
    CONTROLLERS,
    JOBSET,
    KWOK,
    LWS,
    SCHEDULER_PLUGINS,
    TRAINER,
)
from .nodes import create_nodes, fleet_of, nodes_ready
from .pki import ClusterPKI, KeyPair, create_pki
from .processes import Processes

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
STATE_FILE = "sandbox.json"
PORT_ATTEMPTS = 3
WEBHOOK_PROBE_SECONDS = 30.0
#: What the sandbox takes from the full install manifests (the rest is the Deployment
#: and its Service, which the sandbox replaces with a local process).
_RBAC_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
)
#: Everything `up` creates inside the directory; `down` removes exactly these.
_OWNED = (
    STATE_FILE,
    "pki",
    "etcd-data",
    "kubeconfigs",
    "gangkeeper-certs",
    "gangkeeper-config.yaml",
    "kwok.yaml",
    JOBSET,
    LWS,
    TRAINER,
    SCHEDULER_PLUGINS,
    "logs",
    "pids",
)


class SandboxError(RuntimeError):
    """The sandbox could not start; the message names the component and its log."""


@dataclass(frozen=True)
class SandboxInfo:
    """What a user or a test needs to talk to a running sandbox."""

    directory: Path
    kubeconfig: Path
    server: str
    gangkeeper_url: str | None
    nodes: tuple[str, ...]
    startup_seconds: float


def write_kubeconfig(path: Path, server: str, ca: Path, user: str, client: KeyPair) -> Path:
    """A kubeconfig with one cluster/user/context, files referenced by absolute path."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "gangkeeper-sandbox",
                "cluster": {"server": server, "certificate-authority": str(ca.resolve())},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(client.cert.resolve()),
                    "client-key": str(client.key.resolve()),
                },
            }
        ],
        "contexts": [
            {
                "name": "gangkeeper-sandbox",
                "context": {"cluster": "gangkeeper-sandbox", "user": user},
            }
        ],
        "current-context": "gangkeeper-sandbox",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


class Sandbox:
    """One sandbox directory: its processes, PKI and cluster state."""

    def __init__(
        self,
        directory: Path | str,
        *,
        binaries: Binaries | None = None,
        feature_gates: Mapping[str, bool] = DEFAULT_FEATURE_GATES,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = Path(directory).resolve()
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
    ) -> SandboxInfo:
        """Start everything and return once the cluster and gangkeeper are ready.

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
        components: Sequence[str],
        started: float,
        deadline: float,
    ) -> SandboxInfo:
        ports = Ports()
        plane = ControlPlane(self.processes, self.directory, binaries, self.feature_gates)
        pki = create_pki(
            self.directory / "pki",
            service_ip=SERVICE_IP,
            gangkeeper_service_account=(GANGKEEPER_NAMESPACE, GANGKEEPER_ACCOUNT),
        )
        server = f"https://127.0.0.1:{ports.apiserver}"
        admin, kcm, scheduler = self._write_kubeconfigs(server, pki)

        self._log(f"starting etcd on 127.0.0.1:{ports.etcd_client}")
        plane.start_etcd(ports)
        self._wait(
            "etcd",
            lambda: _http_ok(f"http://127.0.0.1:{ports.etcd_client}/health", None),
            deadline,
        )
        self._log(f"starting kube-apiserver on {server}")
        plane.start_apiserver(ports, pki)
        tls = _client_context(pki.ca.cert, pki.admin)
        self._wait("kube-apiserver", lambda: _http_ok(f"{server}/readyz", tls), deadline)

        self._log("starting kube-controller-manager and kube-scheduler")
        plane.start_controller_manager(ports, pki, kcm)
        plane.start_scheduler(ports, scheduler)

        self._install_crds()
        self._start_neighbours(components, pki.ca.cert, pki.webhooks, deadline)
        self._kubectl(
            "label", "namespace", OPTED_IN_NAMESPACE, f"{ENABLED_LABEL}=true", "--overwrite"
        )
        if gangkeeper:
            self._install_rbac(backend)
        else:
            self._kubectl("create", "namespace", GANGKEEPER_NAMESPACE)

        from kubernetes import client
        from kubernetes import config as kube_config

        api = kube_config.new_client_from_config(config_file=str(admin))  # type: ignore[no-untyped-call]
        try:
            core = client.CoreV1Api(api)
            nodes = create_nodes(core, fleet_nodes, kwok=KWOK in components)
            self._log(f"created {len(nodes)} nodes")
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

        gangkeeper_url = None
        state: dict[str, Any] = {
            "server": server,
            "kubeconfig": str(admin),
            "ports": vars(ports),
            "nodes": nodes,
            "backend": backend,
            "components": list(components),
        }
        if gangkeeper:
            argv = self._gangkeeper_argv(ports.gangkeeper, backend, config)
            state["gangkeeper_argv"] = argv
            gangkeeper_url = f"https://127.0.0.1:{ports.gangkeeper}"
            state["gangkeeper_url"] = gangkeeper_url
            self._write_state(state)
            self.start_gangkeeper(deadline=deadline)
            self._register_webhooks(gangkeeper_url, backend)
            self._wait(
                "gangkeeper (called by the API server)",
                self._webhook_called,
                min(deadline, time.monotonic() + WEBHOOK_PROBE_SECONDS),
            )
        else:
            self._write_state(state)
        return SandboxInfo(
            directory=self.directory,
            kubeconfig=admin,
            server=server,
            gangkeeper_url=gangkeeper_url,
            nodes=tuple(nodes),
            startup_seconds=time.monotonic() - started,
        )

    def down(self) -> None:
        """Stop every recorded process and remove what `up` created in the directory."""
        self.processes.stop_all()
        self._remove_state()
        # The directory itself goes only if nothing of the user's is left in it.
        if self.directory.is_dir() and not any(self.directory.iterdir()):
            self.directory.rmdir()

    def _write_kubeconfigs(self, server: str, pki: ClusterPKI) -> tuple[Path, Path, Path]:
        """Each component's identity; returns the admin's, the KCM's and the scheduler's."""
        kubeconfigs = self.directory / "kubeconfigs"
        admin = write_kubeconfig(
            self.kubeconfig, server, pki.ca.cert, "gangkeeper-sandbox-admin", pki.admin
        )
        kcm = write_kubeconfig(
            kubeconfigs / "controller-manager.kubeconfig",
            server,
            pki.ca.cert,
            "system:kube-controller-manager",
            pki.controller_manager,
        )
        scheduler = write_kubeconfig(
            kubeconfigs / "scheduler.kubeconfig",
            server,
            pki.ca.cert,
            "system:kube-scheduler",
            pki.scheduler,
        )
        write_kubeconfig(
            self.gangkeeper_kubeconfig,
            server,
            pki.ca.cert,
            f"system:serviceaccount:{GANGKEEPER_NAMESPACE}:{GANGKEEPER_ACCOUNT}",
            pki.gangkeeper,
        )
        return admin, kcm, scheduler

    def _install_crds(self) -> None:
        """The workload kinds gangkeeper reads: JobSet's and LeaderWorkerSet's as their
        modules ship them, the others from `data/crds`."""
        self._kubectl("apply", "--server-side", "-f", str(CRD_DIR))
        for crds in neighbours.crd_paths():
            how = "-k" if (crds / "kustomization.yaml").is_file() else "-f"
            self._kubectl("apply", "--server-side", how, str(crds))
        self._kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "crd",
            "-l", "app.kubernetes.io/part-of=gangkeeper-sandbox",
        )  # fmt: skip
        self._kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            *(f"crd/{name}" for name in neighbours.served_crds()),
        )  # fmt: skip

    # -- neighbours ------------------------------------------------------------------

    def _start_neighbours(
        self, components: Sequence[str], ca: Path, serving: KeyPair, deadline: float
    ) -> None:
        """kwok, then the controllers with their webhooks registered and answering."""
        if KWOK in components:
            self._log("starting kwok")
            neighbours.start_kwok(self.processes, self.directory, self.kubeconfig)
        scheduler_port = None
        if SCHEDULER_PLUGINS in components:
            version = neighbours.SCHEDULER_PLUGINS_VERSION
            self._log(f"starting the scheduler-plugins scheduler {version}")
            scheduler_port = neighbours.start_coscheduling_scheduler(
                self.processes, self.directory, self.kubeconfig
            )
        running = []
        for name in components:
            controller = CONTROLLERS.get(name)
            if controller is None:
                continue
            self._log(f"starting the {name} controller {controller.version}")
            running.append(
                neighbours.start_controller(
                    self.processes, controller, self.directory, self.kubeconfig, serving
                )
            )
        for started in running:
            readyz = f"http://127.0.0.1:{started.health_port}/readyz"
            self._wait(
                f"{started.controller.name} (readyz)",
                functools.partial(_http_ok, readyz, None),
                deadline,
            )
            configurations = neighbours.webhook_configurations(
                started, ca.read_bytes(), self._kustomize
            )
            self._kubectl(
                "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(configurations)
            )
            for manifest in started.controller.manifests:
                # Through the controller's own webhooks, which the API server may take
                # a moment to call after registration: retried until the deadline.
                path = started.controller.root / manifest
                self._wait(
                    f"{started.controller.name} (applying {path.name})",
                    functools.partial(self._applied, path),
                    deadline,
                )
        if scheduler_port is not None:
            # Its serving certificate is self-signed in its own cert dir: nothing to
            # verify it against, and /healthz tells only that it serves.
            unverified = ssl.create_default_context()
            unverified.check_hostname = False
            unverified.verify_mode = ssl.CERT_NONE
            healthz = f"https://127.0.0.1:{scheduler_port}/healthz"
            self._wait(
                f"{SCHEDULER_PLUGINS} (healthz)",
                functools.partial(_http_ok, healthz, unverified),
                deadline,
            )

    def _applied(self, path: Path) -> bool:
        return self.kubectl("apply", "--server-side", "-f", str(path), check=False).returncode == 0

    def _kustomize(self, directory: Path) -> str:
        done = self.kubectl("kustomize", str(directory), check=False)
        if done.returncode != 0:
            raise SandboxError(f"kubectl kustomize {directory} failed: {done.stderr.strip()}")
        return done.stdout

    # -- gangkeeper ------------------------------------------------------------------

    @property
    def gangkeeper_cert_dir(self) -> Path:
        return self.directory / "gangkeeper-certs"

    @property
    def gangkeeper_kubeconfig(self) -> Path:
        """gangkeeper's own identity: its ServiceAccount, with the rendered RBAC."""
        return self.directory / "kubeconfigs" / "gangkeeper.kubeconfig"

    def start_gangkeeper(self, *, deadline: float | None = None) -> None:
        """(Re)start `gangkeeper serve` with the recorded arguments; wait for /readyz."""
        state = self.state()
        argv = state.get("gangkeeper_argv")
        if not argv:
            raise SandboxError(f"no gangkeeper recorded in {self.directory / STATE_FILE}")
        if self.processes.alive("gangkeeper"):
            return
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.processes.start("gangkeeper", argv, env=env)
        tls = ssl.create_default_context(cafile=str(self.gangkeeper_cert_dir / "ca.crt"))
        url = f"{state['gangkeeper_url']}/readyz"
        self._wait("gangkeeper", lambda: _http_ok(url, tls), deadline or time.monotonic() + 60.0)

    def stop_gangkeeper(self, *, kill: bool = False) -> None:
        """SIGTERM (graceful) or, with `kill`, SIGKILL: a crash, nothing cleaned up."""
        self.processes.stop("gangkeeper", kill=kill)

    def _gangkeeper_argv(self, port: int, backend: str | None, config: Path | None) -> list[str]:
        from gangkeeper.certs import ensure_local

        ensure_local(self.gangkeeper_cert_dir, ["localhost"], ["127.0.0.1"])
        argv = [
            sys.executable, "-m", "gangkeeper.webhook.cli", "serve",
            "--kubeconfig", str(self.gangkeeper_kubeconfig),
            "--host", "127.0.0.1",
            "--port", str(port),
            "--cert-dir", str(self.gangkeeper_cert_dir),
        ]  # fmt: skip
        config_path = _gangkeeper_config(self.directory, backend, config)
        if config_path is not None:
            argv += ["--config", str(config_path)]
        return argv

    def _webhook_called(self) -> bool:
        """Whether the API server now calls gangkeeper for a gang pod in the opted-in
        namespace (a server-side dry run: nothing is created).

        Registration takes effect once the API server's informer has the new
        configurations; returning before that would let a user's first
        `kubectl apply` slip past gangkeeper. Either answer proves the call: the
        pod comes back gated, or a gangkeeper webhook refused it.
        """
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "gangkeeper-sandbox-probe",
                "annotations": {
                    GANG_NAME_ANNOTATION: "probe",
                    MIN_MEMBER_ANNOTATION: "1",
                },
            },
            "spec": {
                "containers": [
                    {
                        "name": "probe",
                        "image": "registry.invalid/probe",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ]
            },
        }
        done = self.kubectl(
            "create", "--dry-run=server", "-n", OPTED_IN_NAMESPACE, "-o", "json", "-f", "-",
            input=json.dumps(probe), check=False,
        )  # fmt: skip
        if done.returncode != 0:
            return "gangkeeper.io" in done.stderr
        gates = json.loads(done.stdout)["spec"].get("schedulingGates") or []
        return any(g.get("name") == GATE for g in gates)

    def _install_rbac(self, backend: str | None) -> None:
        """The namespace, ServiceAccount and RBAC of gangkeeper's install manifests:
        gangkeeper runs with exactly the permissions a real install grants it."""
        docs = yaml.safe_load_all(
            self._render("--namespace", GANGKEEPER_NAMESPACE, backend=backend)
        )
        wanted = [d for d in docs if isinstance(d, dict) and d.get("kind") in _RBAC_KINDS]
        self._kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(wanted))

    def _register_webhooks(self, url: str, backend: str | None) -> None:
        ca = str(self.gangkeeper_cert_dir / "ca.crt")
        rendered = self._render("--url", url, "--ca-bundle", ca, backend=backend)
        self._kubectl("apply", "--server-side", "-f", "-", input=rendered)

    def _render(self, *args: str, backend: str | None) -> str:
        """Output of `gangkeeper manifests ARGS [--backend B]`, run as a user would."""
        argv = [sys.executable, "-m", "gangkeeper.webhook.cli", "manifests", *args]
        if backend:
            argv += ["--backend", backend]
        rendered = subprocess.run(argv, capture_output=True, text=True, check=False)
        if rendered.returncode != 0:
            raise SandboxError(
                f"`gangkeeper {' '.join(argv[3:])}` failed ({rendered.returncode}): "
                f"{rendered.stderr.strip()}"
            )
        return rendered.stdout

    # -- components ------------------------------------------------------------------

    # -- helpers ---------------------------------------------------------------------

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the sandbox's kubectl against it."""
        return subprocess.run(
            [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=check,
        )

    def _kubectl(self, *args: str, input: str | None = None) -> None:
        done = self.kubectl(*args, input=input, check=False)
        if done.returncode != 0:
            raise SandboxError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")

    def _wait(self, component: str, ready: Callable[[], bool], deadline: float) -> None:
        """Poll `ready` until true; fail fast when the component's process died."""
        name = component.split(" ", maxsplit=1)[0]
        while True:
            if name in self.processes.names() and not self.processes.alive(name):
                raise SandboxError(
                    f"{name} exited during startup; see {self.processes.logs / (name + '.log')}"
                    f"{_tail(self.processes.logs / (name + '.log'))}"
                )
            if ready():
                return
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"{component} not ready in time; see {self.processes.logs / (name + '.log')}"
                    f"{_tail(self.processes.logs / (name + '.log'))}"
                )
            time.sleep(0.2)

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
    from gangkeeper.webhook.files.manifests import ManifestError, load_nodes

    try:
        return load_nodes(path)
    except ManifestError as e:
        raise SandboxError(f"fleet file: {e}") from e


def _gangkeeper_config(directory: Path, backend: str | None, config: Path | None) -> Path | None:
    """The --config for serve: the user's file, with `backend` overridden when given."""
    if backend is None:
        return config
    data: dict[str, Any] = {}
    if config is not None:
        loaded = yaml.safe_load(config.read_text()) or {}
        if not isinstance(loaded, dict):
            raise SandboxError(f"{config}: a gangkeeper config must be a mapping")
        data = loaded
    data["backend"] = backend
    path = directory / "gangkeeper-config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _client_context(ca: Path, client: KeyPair) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.load_cert_chain(str(client.cert), str(client.key))
    return ctx


def _http_ok(url: str, tls: ssl.SSLContext | None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0, context=tls) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError, ssl.SSLError):
        return False


def _has_default_sa(core: Any, namespace: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        core.read_namespaced_service_account("default", namespace)
    except ApiException:
        return False
    return True


def _tail(log: Path, lines: int = 15) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n  " + "\n  ".join(text) if text else ""
