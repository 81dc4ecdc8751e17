"""Fixtures of the end-to-end tests: a real control plane with gangkeeper registered.

By default the cluster is a gangkeeper sandbox (real etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and `gangkeeper serve` on loopback) started
once per session through the pytest-kubernetes provider in
`tests/support/k8s_provider.py`. `pytest --k8s-provider=kind` or
`--k8s-kubeconfig=PATH` run the same tests against another cluster where gangkeeper
is installed; tests that need to stop the gangkeeper process skip there.

Without the control-plane binaries every e2e test skips with a reason naming
`deploy/sandbox/build.sh`; `GANGKEEPER_E2E=require` turns that into a failure.

Tests isolate themselves: each creates its own nodes (`create_gpu_nodes`, with a
unique label its pods select) and uses a fresh namespace (`gang_namespace` or
`plain_namespace`). Nothing here mocks the API server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
import yaml
from builders import polling
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from gangkeeper.policies.settings.config import DEFAULT_GPU_RESOURCES, load_config
from gangkeeper.webhook.controller import GangController
from gangkeeper.webhook.sandbox import (
    BUILD_COMMAND,
    BinariesMissing,
    Sandbox,
    create_nodes,
    delete_nodes,
    gpu_node,
)
from gangkeeper.webhook.sandbox.kuberay import KUBERAY
from gangkeeper.webhook.sandbox.kueue import KUEUE
from gangkeeper.webhook.sandbox.nodes import nodes_ready
from gangkeeper.webhook.sandbox.registration import webhook_reached
from gangkeeper.webhook.sandbox.sandbox import OPTED_IN_NAMESPACE

T = TypeVar("T")
ENABLED_LABEL = "gangkeeper.io/enabled"
MUTATING_WEBHOOK = "gangkeeper-mutating"
E2E_DIR = Path(__file__).parent
#: Seconds the session's cluster took to come up, for the terminal summary.
_STARTUP = pytest.StashKey[float]()
#: In the sandbox, gangkeeper's config maps these namespaces to the other backends
#: (`backend_namespace` creates them); the default backend stays `gate`.
BACKEND_NAMESPACES = {b: f"e2e-backend-{b}" for b in ("coscheduling", "volcano", "native")}
#: In the sandbox, gangkeeper's config releases gangs of this namespace without pins
#: (`namespacePlacement: scheduler`): the stock scheduler's own placement, side by side.
SCHEDULER_PLACEMENT_NAMESPACE = "e2e-placement-scheduler"
#: The sandbox's `rebindSeconds`: short, so the watchdog's test does not wait a minute.
REBIND_SECONDS = 5
#: An accelerator the session's config adds to the default `gpuResources`.
SESSION_TPU = "google.com/tpu"
#: The topology key the sandbox's config lists (the topology tests label nodes with it).
ZONE_LABEL = "topology.kubernetes.io/zone"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Only tests that use the cluster need a control plane; the sandbox's own unit
    # tests in this folder run everywhere.
    for item in items:
        if E2E_DIR in Path(str(item.fspath)).parents and "cluster" in getattr(
            item, "fixturenames", ()
        ):
            item.add_marker(pytest.mark.e2e)


def _required() -> bool:
    return os.environ.get("GANGKEEPER_E2E", "").lower() == "require"


def _unavailable(reason: str) -> NoReturn:
    if _required():
        pytest.fail(f"GANGKEEPER_E2E=require: {reason}", pytrace=False)
    pytest.skip(reason)


class Cluster:
    """A running cluster with gangkeeper registered, as the e2e tests see it."""

    def __init__(self, kubeconfig: Path, sandbox: Sandbox | None) -> None:
        self.kubeconfig = str(kubeconfig)
        self.sandbox = sandbox
        self.api_client = kube_config.new_client_from_config(config_file=self.kubeconfig)
        self.core = client.CoreV1Api(self.api_client)
        self.batch = client.BatchV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)
        self.admission = client.AdmissionregistrationV1Api(self.api_client)
        self._nodes: list[str] = []
        kubectl = sandbox.binaries.kubectl if sandbox is not None else shutil.which("kubectl")
        if kubectl is None:
            raise RuntimeError("kubectl is not on PATH")
        self._kubectl = str(kubectl)

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the cluster; with `check`, a non-zero exit fails the
        test with kubectl's stderr in the message."""
        done = subprocess.run(
            [self._kubectl, f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {done.returncode}:\n{done.stderr}\n{done.stdout}"
            )
        return done

    def create_gpu_nodes(
        self,
        prefix: str,
        count: int,
        gpus: int,
        *,
        resource: str = "nvidia.com/gpu",
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] | None = None,
        unschedulable: bool = False,
        capacity: Mapping[str, str] | None = None,
    ) -> list[str]:
        """`count` kwok nodes `prefix-0..` with `gpus` each, once Ready; deleted at
        session end. `unschedulable` creates them cordoned (in the same write, so no
        watcher ever sees them schedulable). `capacity` replaces the node's whole
        capacity (`{"cpu": "8", "memory": "3Gi", "pods": "110"}`: a node without GPUs)."""
        manifests = [
            gpu_node(f"{prefix}-{i}", gpus, resource=resource, labels=labels, taints=taints)
            for i in range(count)
        ]
        if capacity is not None:
            for manifest in manifests:
                manifest["status"] = {"capacity": dict(capacity), "allocatable": dict(capacity)}
        if unschedulable:
            for manifest in manifests:
                manifest.setdefault("spec", {})["unschedulable"] = True
        names = create_nodes(self.core, manifests)
        self._nodes.extend(names)
        # kwok makes them Ready; by then gangkeeper's watch has their capacity too.
        self.wait_for(
            lambda: not nodes_ready(self.core, names),
            timeout=30.0,
            message=f"kwok making nodes {prefix}-* Ready",
        )
        return names

    def delete_created_nodes(self) -> None:
        delete_nodes(self.core, self._nodes)
        self._nodes.clear()

    def _need_sandbox(self) -> Sandbox:
        if self.sandbox is None:
            pytest.skip("stopping gangkeeper needs the sandbox (it runs gangkeeper as a process)")
        return self.sandbox

    def gangkeeper_stop(self, *, kill: bool = False) -> None:
        """Stop the gangkeeper process: SIGTERM, or SIGKILL with `kill`."""
        self._need_sandbox().stop_gangkeeper(kill=kill)

    def gangkeeper_start(self) -> None:
        """Start `gangkeeper serve` again (after `gangkeeper_stop`), once the API server
        reaches it."""
        sandbox = self._need_sandbox()
        sandbox.start_gangkeeper()
        self._wait_webhook_reached(sandbox)

    def gangkeeper_restart(self, *extra_args: str) -> Sandbox:
        """Restart `gangkeeper serve` (with `extra_args` until the next restart)."""
        sandbox = self._need_sandbox()
        sandbox.stop_gangkeeper()
        sandbox.start_gangkeeper(extra_args=extra_args)
        self._wait_webhook_reached(sandbox)
        return sandbox

    def _wait_webhook_reached(self, sandbox: Sandbox) -> None:
        # /readyz answered; the API server may still hold kept-alive connections to the
        # old process, whose first use fails with EOF (CI saw a pod refused so). The same
        # holds after a stop and a later start: the next test's first pod would be refused.
        self.wait_for(lambda: webhook_reached(sandbox.cli, OPTED_IN_NAMESPACE), timeout=60,
                      message="the API server reaches the restarted gangkeeper")

    @contextlib.contextmanager
    def gangkeeper_configured(self, **overrides: object) -> Iterator[None]:
        """gangkeeper restarted with `overrides` (config file keys) over the session's
        config; the file is restored and gangkeeper restarted again afterwards.
        `serve` reads its config once, at start."""
        sandbox = self._need_sandbox()
        argv = sandbox.state()["gangkeeper_argv"]
        path = Path(argv[argv.index("--config") + 1])
        original = path.read_text()
        path.write_text(yaml.safe_dump({**(yaml.safe_load(original) or {}), **overrides}))
        try:
            self.gangkeeper_restart()
            yield
        finally:
            path.write_text(original)
            self.gangkeeper_restart()

    wait_for = staticmethod(polling.wait_for)

    def new_namespace(self, *, opted_in: bool, name: str | None = None) -> str:
        if name is not None:
            # A fixed name (the backend namespaces) may still be terminating after the
            # previous test that used it.
            self.wait_for(
                lambda: not _exists(lambda: self.core.read_namespace(name)),
                timeout=120.0,
                message=f"namespace {name} of a previous test gone",
            )
        name = name or f"{'gang' if opted_in else 'plain'}-{uuid.uuid4().hex[:8]}"
        labels = {ENABLED_LABEL: "true"} if opted_in else {}
        self.core.create_namespace({"metadata": {"name": name, "labels": labels}})
        # The ServiceAccount admission plugin refuses pods until `default` exists.
        self.wait_for(
            lambda: _exists(lambda: self.core.read_namespaced_service_account("default", name)),
            timeout=60.0,
            message=f"ServiceAccount {name}/default",
        )
        return name

    def delete_namespace(self, name: str) -> None:
        # No kubelet confirms deletion of bound pods: delete them at once, or they
        # stay Terminating forever and the namespace with them.
        with contextlib.suppress(ApiException):
            self.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        with contextlib.suppress(ApiException):
            self.core.delete_namespace(name)

    def close(self) -> None:
        self.api_client.close()


@contextlib.contextmanager
def own_sandbox(
    directory: Path, components: Sequence[str], *, config: Path | None = None,
    **options: Any,
) -> Iterator[Cluster]:
    """A sandbox of a test module's own, for neighbours the shared one does not run
    (Kueue, KubeRay, Karpenter): no fleet, `components` started, stopped on exit
    (also when the module's own set-up inside the `with` fails). `options` go to
    `Sandbox`. Skipped without the built binaries, failed under GANGKEEPER_E2E=require."""
    sandbox = Sandbox(directory / "sandbox", **options)
    try:
        sandbox.up(fleet=None, config=config, components=tuple(components), timeout=300)
    except BinariesMissing as e:
        _unavailable(str(e))
    cluster = Cluster(sandbox.kubeconfig, sandbox)
    try:
        yield cluster
    finally:
        cluster.close()
        sandbox.down()


class SharedSandbox:
    """One own_sandbox() for several test modules that need the same neighbours:
    started by the first test that asks, stopped by `pytest_runtest_teardown` as soon
    as the next test does not ask (so it never idles beside the rest of the suite),
    started again if a later test asks."""

    def __init__(self, name: str, components: Sequence[str]) -> None:
        self.name = name
        self.components = tuple(components)
        self._stack: contextlib.ExitStack | None = None
        self._cluster: Cluster | None = None
        #: Why the start failed: the next module is told so at once rather than
        #: spending another start (minutes on 2 cores) on the same failure.
        self._failed: str | None = None

    def get(self, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
        if self._failed is not None:
            pytest.fail(f"the {self.name} sandbox did not start: {self._failed}", pytrace=False)
        if self._cluster is None:
            stack = contextlib.ExitStack()
            directory = tmp_path_factory.mktemp(self.name)
            try:
                self._cluster = stack.enter_context(own_sandbox(directory, self.components))
            except Exception as e:  # skips (binaries missing) are not Exceptions: not kept
                self._failed = " ".join(str(e).split())[:500]
                raise
            self._stack = stack
        return self._cluster

    def stop(self) -> None:
        stack, self._stack, self._cluster = self._stack, None, None
        if stack is not None:
            stack.close()


#: kwok, Kueue and KubeRay's operator: tests/e2e/test_kueue.py and test_kuberay.py
#: (adjacent in collection order) share it instead of starting one each.
KWOK_KUEUE_KUBERAY = SharedSandbox("kwok-kueue-kuberay", ("kwok", KUEUE, KUBERAY))
_SHARED: dict[str, SharedSandbox] = {"kwok_kueue_kuberay": KWOK_KUEUE_KUBERAY}


@pytest.fixture(scope="module")
def kwok_kueue_kuberay(tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    """A sandbox of kwok, Kueue, KubeRay's operator and gangkeeper, no node at the
    start, shared by the modules that ask for it (`SharedSandbox`)."""
    return KWOK_KUEUE_KUBERAY.get(tmp_path_factory)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    # After the test's own fixtures are torn down (they may still talk to the sandbox).
    yield
    following = getattr(nextitem, "fixturenames", ()) if nextitem is not None else ()
    for fixture, shared in _SHARED.items():
        if fixture not in following:
            shared.stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    # An interrupted run has no last teardown: stop what is still running.
    for shared in _SHARED.values():
        shared.stop()


def _exists(read: Callable[[], object]) -> bool:
    try:
        read()
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


@pytest.fixture(scope="session")
def k8s_cluster_manager(
    request: pytest.FixtureRequest,
    k8s_manager: Callable[..., type[Any]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """The session's pytest-kubernetes cluster manager (the sandbox by default)."""
    from support.k8s_provider import SandboxManager

    klass = k8s_manager()
    options = request.config
    try:
        manager = klass(
            options.getoption("k8s_cluster_name"),
            options.getoption("k8s_provider_config"),
            options.getoption("k8s_kubeconfig") or options.getoption("k8s_kubeconfig_override"),
        )
    except BinariesMissing as e:
        _unavailable(str(e))
    except RuntimeError as e:
        provider = options.getoption("k8s_provider") or "default"
        _unavailable(
            f"cluster provider {provider!r} unavailable ({e}); without --k8s-provider the "
            f"tests use the local sandbox, built by `{BUILD_COMMAND}`"
        )
    started = time.monotonic()
    if isinstance(manager, SandboxManager):
        config = tmp_path_factory.mktemp("gangkeeper-config") / "config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "namespaceBackends": {ns: b for b, ns in BACKEND_NAMESPACES.items()},
                    "namespacePlacement": {SCHEDULER_PLACEMENT_NAMESPACE: "scheduler"},
                    # The watchdog's test waits this long for a stuck member.
                    "rebindSeconds": REBIND_SECONDS,
                    "topology": [ZONE_LABEL],
                    # The defaults and a TPU: `sandbox up` registers the webhooks for
                    # the accelerators this config names (test_gpu_resources).
                    "gpuResources": [*DEFAULT_GPU_RESOURCES, SESSION_TPU],
                }
            )
        )
        # Tests bring their own nodes; a fleet would only absorb their pods.
        manager.create(directory=tmp_path_factory.mktemp("sandbox"), fleet=None, config=config)
    else:
        manager.create()
    request.config.stash[_STARTUP] = time.monotonic() - started
    yield manager
    manager.delete()


@pytest.fixture(scope="session")
def cluster(k8s_cluster_manager: Any) -> Iterator[Cluster]:
    """The cluster of the session, with gangkeeper registered (see module docstring)."""
    sandbox = getattr(k8s_cluster_manager, "sandbox", None)
    kubeconfig = k8s_cluster_manager.kubeconfig
    if kubeconfig is None:
        pytest.fail("the cluster manager has no kubeconfig after create()")
    handle = Cluster(Path(kubeconfig), sandbox)
    try:
        if not _exists(
            lambda: handle.admission.read_mutating_webhook_configuration(MUTATING_WEBHOOK)
        ):
            pytest.fail(
                f"MutatingWebhookConfiguration {MUTATING_WEBHOOK} not found: install gangkeeper "
                "in the cluster (or run without --k8s-provider/--k8s-kubeconfig for the sandbox)",
                pytrace=False,
            )
        yield handle
    finally:
        handle.delete_created_nodes()
        handle.close()


@pytest.fixture
def gang_namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace labelled gangkeeper.io/enabled=true; deleted afterwards."""
    name = cluster.new_namespace(opted_in=True)
    yield name
    cluster.delete_namespace(name)


@pytest.fixture
def own_controller(cluster: Cluster, gang_namespace: str) -> Iterator[GangController]:
    """A second controller with a 2 s stuck timeout and its own Lease (in the test
    namespace), so Events about a waiting gang come without the default 5 minutes."""
    api = kube_config.new_client_from_config(config_file=cluster.kubeconfig)
    controller = GangController(
        api,
        load_config({"gangTimeoutSeconds": 2}),
        namespace=gang_namespace,
        identity="e2e-stuck-reporter",
    )
    controller.start()
    cluster.wait_for(
        lambda: controller.is_leader and controller.synced,
        timeout=30,
        message="in-test controller elected and synced",
    )
    yield controller
    controller.stop()
    api.close()


@pytest.fixture
def plain_namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace without the opt-in label; deleted afterwards."""
    name = cluster.new_namespace(opted_in=False)
    yield name
    cluster.delete_namespace(name)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    startup = config.stash.get(_STARTUP, None)
    if startup is not None:
        terminalreporter.write_line(f"e2e cluster startup: {startup:.1f}s")


@pytest.fixture
def backend_namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """An opted-in namespace whose pods get the backend `request.param`.

    `gate` is the default backend: a fresh namespace. The others are namespaces the
    sandbox's gangkeeper config maps to them; on another cluster they are skipped.
    """
    backend = request.param
    if backend == "gate":
        name = cluster.new_namespace(opted_in=True)
    elif cluster.sandbox is None:
        pytest.skip(f"backend {backend} per namespace is configured only in the sandbox")
    else:
        name = cluster.new_namespace(opted_in=True, name=BACKEND_NAMESPACES[backend])
    yield name
    cluster.delete_namespace(name)


@pytest.fixture
def scheduler_placement_namespace(cluster: Cluster) -> Iterator[str]:
    """An opted-in namespace whose gate-backend gangs are released unpinned (the
    sandbox's config says `namespacePlacement: scheduler` for it)."""
    if cluster.sandbox is None:
        pytest.skip("placement per namespace is configured only in the sandbox")
    name = cluster.new_namespace(opted_in=True, name=SCHEDULER_PLACEMENT_NAMESPACE)
    yield name
    cluster.delete_namespace(name)
