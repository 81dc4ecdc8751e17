"""One sandbox control plane shared by the cluster benchmarks (scheduling, latency, memory).

`open_cluster()` starts `gangkeeper.webhook.sandbox.Sandbox` in a temporary directory
with no fleet and a gangkeeper config made for the benchmarks (the `native` namespace
routed to the native backend; a declared GPU pool with no nodes, so latency pods are
admitted yet never placed), creates the benchmark namespaces, and tears everything
down on exit. `BenchCluster` wraps the few cluster operations the benchmarks share.
`open_cluster(kueue=True)` (what `python -m bench.scheduling` asks for) also runs
Kueue v0.17.0's manager with `KUEUE_CONFIG`; `python -m bench`'s shared sandbox does
not, so Kueue's pod and Job webhooks stay out of the latency and memory figures.

May touch: its temporary sandbox directory, the processes the sandbox starts, and
objects it creates in that sandbox's API server. Nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gangkeeper.policies.names import (
    ENABLED_LABEL,
    GANG_NAME_ANNOTATION,
    GATE,
    MIN_MEMBER_ANNOTATION,
)
from gangkeeper.webhook.cli.serve import NOOP_ENV
from gangkeeper.webhook.sandbox.kueue import KUEUE

POOL_LABEL = "bench.gangkeeper.io/pool"
#: kwok's pod-complete stage: a pod with this annotation succeeds that long after it runs.
RUN_FOR = "pod-complete.stage.kwok.x-k8s.io/delay"
LATENCY_POOL = "latency"
#: The schedulerName gangkeeper's coscheduling backend writes (its config default).
COSCHEDULING_SCHEDULER = "scheduler-plugins-scheduler"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
GPU = "nvidia.com/gpu"
KUEUE_FLAVOR = "bench-flavor"

#: name → opted in? The scheduling namespaces must match bench.scheduling.NAMESPACES.
NAMESPACES: Mapping[str, bool] = {
    "bench-sched-none": False,
    "bench-sched-gate": True,
    "bench-sched-native": True,
    "bench-sched-coscheduling": True,
    "bench-sched-kueue": False,
    "bench-sched-kueue-gate": True,
    "bench-latency-plain": False,
    "bench-latency-gang": True,
    # Labelled by create_latency for its no-op webhook pair, not for gangkeeper.
    "bench-latency-noop": False,
    "bench-memory": False,
    "bench-place-pinned": True,
    "bench-place-scheduler": True,
    "bench-place-other": False,  # bench.placement's competing pods of no gang
    # bench.preemption_cluster: the same trace on gangkeeper's backend and on native.
    "bench-preempt-gate": True,
    "bench-preempt-native": True,
}

BENCH_CONFIG: Mapping[str, Any] = {
    "backend": "gate",
    "namespaceBackends": {
        "bench-sched-native": "native",
        "bench-sched-coscheduling": "coscheduling",
        "bench-preempt-native": "native",
    },
    # bench.placement: the same gangs released pinned and, here, unpinned.
    "namespacePlacement": {"bench-place-scheduler": "scheduler"},
    # bench.placement's competed rounds: a member pinned to a node a pod of no gang took
    # is deleted (and recreated by its Job) after this.
    "rebindSeconds": 10,
    # A pool that could hold the latency pods but has no Node now: the validating
    # webhook admits them (capacity could exist) while the scheduler never binds them,
    # so the latency benchmark measures creation alone.
    # No autoscaler runs here: placeholders for those gangs would only add writes to
    # the API server the latency benchmark measures.
    "autoscaling": "off",
    "pools": [
        {
            "name": "bench-latency",
            "maxCount": 1000,
            "labels": {POOL_LABEL: LATENCY_POOL},
            "allocatable": {"nvidia.com/gpu": 8},
        }
    ],
}


#: Kueue's own all-or-nothing for bench.scheduling's `kueue` modes, in Kueue
#: v0.17.0's Configuration (`apis/config/v1beta2/configuration_types.go`
#: WaitForPodsReady; it is on when the key is present: v1beta2 has no `enable`, and
#: Kueue decodes its config strictly, so an unknown key stops the manager).
KUEUE_CONFIG: Mapping[str, Any] = {
    "waitForPodsReady": {
        # An admitted Job whose pods are not all Ready this long after admission is
        # evicted (suspended, its pods deleted) and requeued. Kueue's default is 5 min
        # against jobs of hours; the trace's jobs run 3-9 s, and a gang that fits has
        # its pods bound and Ready (kwok, `pod-ready` delay 0 s) within a few seconds
        # on this 2-core machine, so 10 s evicts only gangs that cannot be placed.
        "timeout": "10s",
        # Kueue's sequential admission: no other Job of the ClusterQueue is admitted
        # while an admitted one is not yet Ready, so two partly bound Jobs cannot hold
        # each other's GPUs (Kueue's documented remedy for that deadlock).
        "blockAdmission": True,
        "requeuingStrategy": {
            # Requeued behind the Jobs that arrived meanwhile (the default), so one
            # Job that does not fit does not block the queue head again at once.
            "timestamp": "Eviction",
            # Backoff b*2^(n-1): Kueue's default base of 60 s is ten trace jobs long;
            # 1 s, at most 10 s, keeps the same ratio to the jobs as minutes to hours.
            "backoffBaseSeconds": 1,
            "backoffMaxSeconds": 10,
            # No limit (null, the default): a Job deactivated after N requeues would
            # never finish, which says nothing about the schedule.
        },
    }
}


def api_client(kubeconfig: Path, pool: int = 16) -> Any:
    """A kubernetes ApiClient whose connection pool fits our worker threads."""
    from kubernetes import client
    from kubernetes import config as kube_config

    configuration = client.Configuration()
    kube_config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=configuration
    )
    configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)


class RawApi:
    """Plain keep-alive HTTPS requests to the API server, one connection per thread.

    For bulk creates and latency samples: the typed client spends milliseconds of CPU
    per call (model conversion, urllib3), which on a 2-core machine slows the API
    server it is measuring and adds noise to every sample. The connections are
    gangkeeper's own (`webhook/direct.py`), built from the sandbox's kubeconfig.
    """

    def __init__(self, configuration: Any) -> None:
        from gangkeeper.webhook.kube.direct import DirectTransport

        transport = DirectTransport.from_configuration(configuration)
        if transport is None:
            raise ValueError(f"RawApi cannot reach {configuration.host} without a proxy")
        self._transport = transport

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        """(status, body); a kept-alive connection the server closed is reopened once."""
        answer = self._transport.request(
            method, path, body, content_type=content_type, timeout=60.0
        )
        return answer.status, answer.body

    def create(self, path: str, obj: Mapping[str, Any]) -> None:
        """POST an object; anything but 201 raises with the API server's message."""
        status, body = self.request("POST", path, json.dumps(obj).encode())
        if status != 201:
            raise RuntimeError(f"POST {path}: HTTP {status}: {body[:300].decode(errors='replace')}")


@dataclass
class BenchCluster:
    """A running sandbox plus typed API handles, for the benchmarks."""

    sandbox: Any
    kubeconfig: Path
    api: Any
    core: Any
    startup_seconds: float
    #: Progress lines (to stderr in `python -m bench`); the figures go to the report.
    log: Callable[[str], None] = print

    @functools.cached_property
    def batch(self) -> Any:
        from kubernetes import client

        return client.BatchV1Api(self.api)

    @functools.cached_property
    def raw(self) -> RawApi:
        return RawApi(self.api.configuration)

    # -- gangkeeper process ------------------------------------------------------------

    def gangkeeper_pid(self, name: str = "gangkeeper") -> int:
        """The PID of gangkeeper's process `name` (`gangkeeper`: admission)."""
        record = self.sandbox.processes.record(name)
        if record is None:
            raise RuntimeError(f"the sandbox has no {name} process recorded")
        return int(record.pid)

    def gangkeeper_processes(self) -> list[str]:
        """Admission's process, and the controller's when it runs apart (the default)."""
        controller = self.sandbox.controller_process
        return ["gangkeeper"] if controller == "gangkeeper" else ["gangkeeper", controller]

    def restart_gangkeeper(self) -> float:
        """Restart `gangkeeper serve`; return seconds until its /readyz said ready."""
        self.sandbox.stop_gangkeeper()
        started = time.monotonic()
        self.sandbox.start_gangkeeper(deadline=time.monotonic() + 600)
        return time.monotonic() - started

    # -- nodes and pods ----------------------------------------------------------------

    def ensure_fleet(self, name: str, count: int, gpus: int, *, label: str) -> list[str]:
        """`count` Ready nodes `bench-<name>-<i>` with `gpus` GPUs each, labelled label=name."""
        from gangkeeper.webhook.sandbox import create_nodes, gpu_node

        wanted = [f"bench-{name}-{i}" for i in range(count)]
        existing = {
            n.metadata.name for n in self.core.list_node(label_selector=f"{label}={name}").items
        }
        missing = [n for n in wanted if n not in existing]
        create_nodes(self.core, [gpu_node(n, gpus, labels={label: name}) for n in missing])
        return wanted

    def wait_nodes_free(self, nodes: list[str], timeout: float = 120.0) -> None:
        """Wait until no pod is bound to these nodes (the previous run is gone)."""
        wait_for(lambda: self.bound_on(nodes) == 0, timeout, f"nodes {nodes[0]}... free", 0.5)

    def bound_on(self, nodes: list[str]) -> int:
        """How many pods are bound to these nodes now (any namespace)."""
        total = 0
        for node in nodes:
            pods = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
            total += len(pods.items)
        return total

    def clear_pods(self, namespace: str, timeout: float = 120.0) -> None:
        """Delete every Job and pod of the namespace at once (grace 0) and wait."""
        # Through the raw client, which reads the whole answer: an unread streamed
        # response is dropped, and the API server then aborts the collection delete.
        # Jobs first, or the Job controller recreates the pods deleted next.
        for what, path in (
            ("Jobs", f"/apis/batch/v1/namespaces/{namespace}/jobs?propagationPolicy=Background"),
            ("pods", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0"),
        ):
            status, body = self._delete_collection(path)
            if status != 200:
                raise RuntimeError(f"deleting {what} of {namespace}: HTTP {status} {body[:300]!r}")
        wait_for(
            lambda: not self.core.list_namespaced_pod(namespace, limit=1).items,
            timeout,
            f"pods of {namespace} deleted",
        )

    def _delete_collection(self, path: str, attempts: int = 3) -> tuple[int, bytes]:
        """One collection DELETE, asked again when the answer times out: a loaded
        2-core API server once took over 60 s to answer one (2026-12-03, load 18), and
        asking again for a delete is harmless."""
        for attempt in range(1, attempts + 1):
            try:
                return self.raw.request("DELETE", path)
            except OSError:  # TimeoutError and dropped connections
                if attempt == attempts:
                    raise
                self.log(f"DELETE {path}: no answer, asking again ({attempt}/{attempts})")
        raise AssertionError("unreachable")

    # -- what each scheduling mode needs ---------------------------------------------

    def probe_pod(self, namespace: str) -> dict[str, Any]:
        """The pod as admission would store it (server-side dry run: nothing is created)."""
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "bench-probe",
                "annotations": {
                    GANG_NAME_ANNOTATION: "bench-probe",
                    MIN_MEMBER_ANNOTATION: "1",
                },
            },
            "spec": {
                "nodeSelector": {POOL_LABEL: LATENCY_POOL},
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.invalid/probe",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        }
        response = self.core.create_namespaced_pod(
            namespace, body, dry_run="All", _preload_content=False
        )
        pod: dict[str, Any] = json.loads(response.data)
        return pod

    def runs_kueue(self) -> bool:
        return KUEUE in self.sandbox.state().get("components", [])

    def ensure_kueue_queue(self, namespace: str, queue: str, nodes: list[str]) -> None:
        """A ClusterQueue `namespace` (for that namespace alone) whose quota is the GPUs
        and CPUs of `nodes`, and its LocalQueue `queue` there, once Kueue says Active.
        CPU is covered too: Kueue does not admit a Workload requesting a resource its
        ClusterQueue does not list, and the trace's pods request 100m each."""
        gpus = cpus = 0
        for name in nodes:
            allocatable = self.core.read_node(name).status.allocatable or {}
            gpus += int(allocatable.get(GPU, 0))
            cpus += int(allocatable.get("cpu", 0))
        objects = [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": KUEUE_FLAVOR},
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": namespace},
                "spec": {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": namespace}
                    },
                    "resourceGroups": [
                        {
                            "coveredResources": [GPU, "cpu"],
                            "flavors": [
                                {
                                    "name": KUEUE_FLAVOR,
                                    "resources": [
                                        {"name": GPU, "nominalQuota": gpus},
                                        {"name": "cpu", "nominalQuota": cpus},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": queue, "namespace": namespace},
                "spec": {"clusterQueue": namespace},
            },
        ]
        self.sandbox.cli.must("apply", "-f", "-", input=yaml.safe_dump_all(objects))
        wait_for(
            functools.partial(self._queue_active, namespace, queue),
            60,
            f"LocalQueue {namespace}/{queue} Active",
            0.5,
        )

    def _queue_active(self, namespace: str, queue: str) -> bool:
        from kubernetes import client

        found: Any = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", namespace, "localqueues", queue
        )
        conditions = (found.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)

    def mode_unavailable(self, mode: str, namespace: str | None = None) -> str | None:
        """Why a scheduling mode cannot be measured on this sandbox (its Jobs go to
        `namespace`, by default `bench-sched-<mode>`), or None if it can."""
        namespace = namespace or f"bench-sched-{mode}"
        components = self.sandbox.state().get("components", [])
        if mode == "coscheduling" and "scheduler-plugins" not in components:
            return "the sandbox runs no scheduler-plugins scheduler (component scheduler-plugins)"
        if mode.startswith("kueue") and KUEUE not in components:
            return (
                "the sandbox runs no Kueue (component kueue; `python -m bench.scheduling` "
                "starts one, `python -m bench`'s shared sandbox does not)"
            )
        if mode in ("none", "kueue"):
            return None
        try:
            pod = self.probe_pod(namespace)
        except Exception as exc:
            return f"probe pod refused in {namespace}: {_first_line(exc)}"
        spec = pod.get("spec") or {}
        gates = [g.get("name") for g in spec.get("schedulingGates") or []]
        if GATE not in gates:
            return f"gangkeeper did not gate a probe pod in {namespace} (webhook not mutating)"
        if mode == "coscheduling" and (
            spec.get("schedulerName") != COSCHEDULING_SCHEDULER
            or COSCHEDULING_LABEL not in ((pod.get("metadata") or {}).get("labels") or {})
        ):
            return (
                f"gangkeeper's coscheduling backend did not label a probe pod in {namespace} "
                f"for {COSCHEDULING_SCHEDULER}"
            )
        if mode == "native":
            if not self._serves("scheduling.k8s.io", "podgroups"):
                return "the API server does not serve scheduling.k8s.io PodGroups"
            group = (spec.get("schedulingGroup") or {}).get("podGroupName")
            if not group:
                return (
                    "gangkeeper's native backend did not set spec.schedulingGroup.podGroupName "
                    f"on a probe pod in {namespace}"
                )
        return None

    def _serves(self, group: str, plural: str) -> bool:
        from kubernetes import client

        try:
            groups = client.ApisApi(self.api).get_api_versions()
        except Exception:
            return False
        for g in groups.groups:
            if g.name != group:
                continue
            for version in g.versions:
                found = client.CustomObjectsApi(self.api).get_api_resources(group, version.version)
                if any(r.name == plural for r in found.resources):
                    return True
        return False


def wait_for(
    predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _has_default_sa(core: Any, namespace: str) -> bool:
    found = core.list_namespaced_service_account(namespace, field_selector="metadata.name=default")
    return bool(found.items)


def create_namespace(core: Any, name: str, *, opted_in: bool) -> None:
    """A namespace (labelled for gangkeeper when `opted_in`), ready for pods."""
    labels = {ENABLED_LABEL: "true"} if opted_in else {}
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    # The ServiceAccount admission plugin refuses pods until "default" exists.
    wait_for(
        functools.partial(_has_default_sa, core, name), 60, f"default ServiceAccount in {name}"
    )


def _first_line(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    text = body.decode() if isinstance(body, bytes) else str(body or exc)
    return " ".join(text.split())[:300]


@contextlib.contextmanager
def open_cluster(
    quick: bool = True,
    log: Callable[[str], None] | None = None,
    *,
    kueue: bool = False,
    neighbours: Sequence[str] | None = None,
) -> Iterator[BenchCluster]:
    """Start a sandbox for the benchmarks and stop it (removing its state) afterwards:
    the sandbox's default `neighbours` unless given (the bench test runs kwok alone),
    and with `kueue` Kueue's manager beside them, with `KUEUE_CONFIG`."""
    from kubernetes import client

    from gangkeeper.webhook.sandbox import Sandbox
    from gangkeeper.webhook.sandbox.neighbours import ALL_COMPONENTS

    directory = Path(tempfile.mkdtemp(prefix="gangkeeper-bench-"))
    config = directory / "bench-config.yaml"
    config.write_text(yaml.safe_dump(dict(BENCH_CONFIG), sort_keys=False))
    sandbox = Sandbox(directory, log=log, kueue_config=KUEUE_CONFIG if kueue else None)
    chosen = tuple(ALL_COMPONENTS if neighbours is None else neighbours)
    components = (*chosen, KUEUE) if kueue else chosen
    # gangkeeper's `/noop` endpoint (allow without looking) answers the no-op webhook
    # pair of `create_latency`'s floor; only a server started with this serves it.
    # Set for this cluster's life only: a test process starts other servers after it.
    before = os.environ.get(NOOP_ENV)
    os.environ[NOOP_ENV] = "1"
    try:
        # Kueue's start (CRDs, its certificate rotator, webhooks) took 100 s of a
        # 3.5 min start on a loaded 2-core machine: more than the default 180 s.
        info = sandbox.up(
            fleet=None, config=config, components=components, timeout=420 if kueue else 180
        )
        api = api_client(info.kubeconfig)
        core: Any = client.CoreV1Api(api)
        for name, opted_in in NAMESPACES.items():
            create_namespace(core, name, opted_in=opted_in)
        try:
            yield BenchCluster(
                sandbox=sandbox,
                kubeconfig=info.kubeconfig,
                api=api,
                core=core,
                startup_seconds=info.startup_seconds,
                log=log or (lambda _msg: None),
            )
        finally:
            api.close()
    finally:
        if before is None:
            os.environ.pop(NOOP_ENV, None)
        else:
            os.environ[NOOP_ENV] = before
        sandbox.down()
        config.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            directory.rmdir()
