"""Builders and observers for the end-to-end tests that run real workload controllers.

The objects are shaped as users write them for the JobSet (v1alpha2) and
LeaderWorkerSet (v1) controllers the sandbox runs, and every pod template carries
`RUN_FOR`, the kwok Stage annotation after which kwok completes the pod (a training
step's duration). Observers read pods back as the API server stores them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kubernetes import watch
from kubernetes.client import ApiClient

from builders.cluster import GPU, POOL_LABEL
from gangkeeper.policies.assigner.pin import pin_of
from gangkeeper.policies.names import GATE
from gangkeeper.policies.podspec import placement_of

#: kwok completes a Ready pod carrying this annotation after its value (a duration).
RUN_FOR = "pod-complete.stage.kwok.x-k8s.io/delay"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


def gpu_template(
    pool: str, gpus: int, *, run_for: str | None = None, container: str = "trainer"
) -> dict[str, Any]:
    """A pod template selecting the test's nodes, `gpus` each, running `run_for`."""
    annotations = {RUN_FOR: run_for} if run_for else {}
    return {
        "metadata": {"annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {POOL_LABEL: pool},
            "containers": [
                {
                    "name": container,
                    "image": "registry.invalid/e2e/trainer:1",
                    "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
                }
            ],
        },
    }


def run_blocker(cluster: Any, namespace: str, pool: str, gpus: int) -> str:
    """A pod gangkeeper does not manage holding `gpus` of the pool, once kwok runs it
    (it takes the place of other tenants' work); returns its name."""
    name = "blocker"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}}
    pod["spec"] = gpu_template(pool, gpus)["spec"]
    cluster.core.create_namespaced_pod(namespace, pod)
    cluster.wait_for(
        lambda: is_ready(cluster.core.read_namespaced_pod(name, namespace)),
        timeout=60,
        message=f"the {gpus}-GPU blocker running (kwok)",
    )
    return name


def replicated_job(
    name: str,
    template: Mapping[str, Any],
    *,
    replicas: int = 1,
    parallelism: int = 1,
    depends_on: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "completionMode": "Indexed",
                "completions": parallelism,
                "parallelism": parallelism,
                "backoffLimit": 0,
                "template": dict(template),
            }
        },
    }
    if depends_on:
        job["dependsOn"] = depends_on
    return job


def jobset(
    name: str,
    namespace: str,
    replicated_jobs: list[dict[str, Any]],
    *,
    annotations: Mapping[str, str] | None = None,
    startup_policy: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicatedJobs": replicated_jobs}
    if startup_policy:
        spec["startupPolicy"] = {"startupPolicyOrder": startup_policy}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {})},
        "spec": spec,
    }


def leaderworkerset(
    name: str,
    namespace: str,
    template: Mapping[str, Any],
    *,
    size: int,
    replicas: int,
    startup_policy: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "leaderWorkerTemplate": {"size": size, "workerTemplate": dict(template)},
    }
    if startup_policy:
        spec["startupPolicy"] = startup_policy
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def is_gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or [])


def is_ready(pod: Any) -> bool:
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ()
    )


def is_bound(pod: Any) -> bool:
    return bool(pod.spec.node_name)


def pinned_node(pod: Any) -> str | None:
    """The node gangkeeper's pin ties the pod to (`assigner.pin.pin_of`: its node by
    name, or an earlier version's hostname label, which is the node's name in the
    sandbox), its binding aside; None when unpinned."""
    spec = ApiClient().sanitize_for_serialization(pod.spec)
    spec.pop("nodeName", None)
    pin = pin_of(placement_of(spec))
    return None if pin is None else pin.node or pin.hostname


def pods_of(cluster: Any, namespace: str, selector: str = "") -> list[Any]:
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def wait_for_pods(
    cluster: Any,
    namespace: str,
    selector: str,
    count: int,
    *,
    where: Callable[[Any], bool] = lambda pod: True,
    timeout: float = 60.0,
    what: str = "present",
) -> list[Any]:
    """Wait until exactly `count` of `selector`'s pods satisfy `where` (e.g.
    `is_bound`, `is_ready`); returns all of `selector`'s pods then."""

    def matched() -> list[Any] | None:
        pods = pods_of(cluster, namespace, selector)
        return pods if sum(where(p) for p in pods) == count else None

    found: list[Any] = cluster.wait_for(
        matched, timeout=timeout, message=f"{count} pods {selector} {what} in {namespace}"
    )
    return found


def condition(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
    )


class PodRecorder:
    """Every pod of a namespace (or of `selector`) as the API server stored it at
    creation, and the node each was bound to, from a watch: admission answers are
    seen in the ADDED events.
    """

    def __init__(self, cluster: Any, namespace: str, selector: str = "") -> None:
        self.created: dict[str, Any] = {}
        self.nodes: dict[str, str] = {}
        self._cluster = cluster
        self._namespace = namespace
        self._selector = selector
        self._stop = threading.Event()
        self._since = cluster.core.list_namespaced_pod(namespace).metadata.resource_version
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._lock = threading.Lock()

    def _run(self) -> None:
        while not self._stop.is_set():
            stream = watch.Watch()
            for event in stream.stream(
                self._cluster.core.list_namespaced_pod,
                self._namespace,
                label_selector=self._selector,
                resource_version=self._since,
                timeout_seconds=5,
            ):
                pod = event["object"]
                self._since = pod.metadata.resource_version
                with self._lock:
                    if event["type"] == "ADDED":
                        self.created.setdefault(pod.metadata.name, pod)
                    if pod.spec.node_name:
                        self.nodes[pod.metadata.name] = pod.spec.node_name
                if self._stop.is_set():
                    stream.stop()
                    break

    def start(self) -> PodRecorder:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def gated_at_creation(self) -> dict[str, bool]:
        with self._lock:
            return {name: is_gated(pod) for name, pod in self.created.items()}


@contextmanager
def recording(cluster: Any, namespace: str, selector: str = "") -> Iterator[PodRecorder]:
    recorder = PodRecorder(cluster, namespace, selector).start()
    try:
        yield recorder
    finally:
        recorder.stop()
