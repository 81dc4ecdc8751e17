"""Helpers of the end-to-end fault tests: replicas of gangkeeper, its metrics read
straight from one process, an AdmissionReview sent straight to one process, gated
gangs on cordoned nodes that the test releases at a moment it chooses, and counts of
what happened (gates still on, pods bound, Events).

Talks to the sandbox's processes (through `gangkeeper.webhook.sandbox.faults`) and
the API server; mocks nothing.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import ssl
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from builders.cluster import POOL_LABEL, gang_pod, unique
from gangkeeper.policies.names import EVENT_SOURCE, GATE, LEASE_NAME
from gangkeeper.webhook.sandbox.faults import Faults

#: The sandbox's Lease (`serve` default: 15 s) and retry period (2 s).
LEASE_SECONDS = 15.0
RETRY_SECONDS = 2.0
GANGKEEPER_NAMESPACE = "gangkeeper-system"
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def tls(cluster: Any) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cluster.sandbox.gangkeeper_cert_dir / "ca.crt"))


def metrics(cluster: Any, url: str) -> dict[str, float]:
    """One process's /metrics ({series: value}): each series by its full name
    (`name{labels}`), and a labelled family's sum by its bare name too."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10, context=tls(cluster)) as answer:
        text = answer.read().decode()
    found: dict[str, float] = {}
    sums: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        with contextlib.suppress(ValueError):
            found[name] = float(value)
            if "{" in name:
                bare = name.split("{", 1)[0]
                sums[bare] = sums.get(bare, 0.0) + float(value)
    return {**sums, **found}


def settled_metrics(
    cluster: Any, url: str, names: tuple[str, ...], quiet: float = 1.5, timeout: float = 60.0
) -> dict[str, float]:
    """One process's /metrics once the samples `names` stop changing for `quiet` seconds.

    A controller counts a release after the API server has applied its PATCHes (a burst's
    gates are counted once the burst is done): a count read the instant the last gate is
    seen lifted may not include it yet.
    """
    deadline = time.monotonic() + timeout
    last = metrics(cluster, url)
    while True:
        time.sleep(quiet)
        now = metrics(cluster, url)
        if all(now.get(n) == last.get(n) for n in names) or time.monotonic() > deadline:
            return now
        last = now


def review_answer(cluster: Any, url: str, namespace: str, pool: str) -> dict[str, Any]:
    """POST an AdmissionReview of a 1-GPU gang pod on `pool` straight to one process's
    /mutate; its response."""
    pod = gang_pod("probe", pool, gang="probe", min_member=1)
    pod["metadata"]["namespace"] = namespace
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": namespace,
            "name": "probe",
            "object": pod,
            "userInfo": {"username": "e2e"},
            "dryRun": True,
        },
    }
    request = urllib.request.Request(
        f"{url}/mutate", data=json.dumps(review).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10, context=tls(cluster)) as answer:
        assert answer.status == 200
        body: dict[str, Any] = json.loads(answer.read())
    return body["response"]  # type: ignore[no-any-return]


def lease_holder(cluster: Any) -> str:
    lease = cluster.coordination.read_namespaced_lease(LEASE_NAME, GANGKEEPER_NAMESPACE)
    return str(lease.spec.holder_identity or "")


def identity_of(faults: Faults, name: str) -> str:
    """`serve`'s controller identity for a process of ours: host name and PID."""
    return f"{socket.gethostname()}-{faults.pid(name)}"


def process_state(faults: Faults, name: str) -> str:
    """The /proc state letter (R, S, T = stopped, Z) or "" once gone."""
    record = faults.processes.record(name)
    if record is None:
        return ""
    try:
        stat = Path(f"/proc/{record.pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[0]


@contextlib.contextmanager
def leading_replica(
    cluster: Any, name: str, env: Mapping[str, str] | None = None
) -> Iterator[tuple[Faults, str]]:
    """A second `gangkeeper serve` (`name`, with `env`) that holds the Lease, and the
    sandbox's own (registered with the API server) back as the follower.

    The sandbox's process is stopped gracefully first (it gives the Lease up), the
    replica is started and elected, then the sandbox's is started again. Afterwards
    the replica is resumed if stopped and stopped gracefully; the sandbox's leads.
    """
    faults = Faults(cluster.sandbox)
    cluster.gangkeeper_stop()
    try:
        url = faults.start_replica(name, env=env)
        me = identity_of(faults, name)
        cluster.wait_for(lambda: lease_holder(cluster) == me, timeout=30,
                         message=f"replica {name} elected")
    finally:
        cluster.gangkeeper_start()
    try:
        yield faults, url
    finally:
        if process_state(faults, name) == "T":
            faults.signal(name, signal.SIGCONT)
        faults.processes.stop(name)
        cluster.wait_for(
            lambda: lease_holder(cluster) == identity_of(
                faults, cluster.sandbox.controller_process),
            timeout=LEASE_SECONDS + 30, message="the sandbox's gangkeeper leads again",
        )


# -- gangs the test releases when it wants -------------------------------------------------


def cordoned_pool(cluster: Any, prefix: str, nodes: int, gpus: int) -> tuple[str, list[str]]:
    """Nodes that exist (admission accepts gangs on them) but are cordoned by taint,
    so nothing is released onto them until `uncordon`."""
    pool = unique(prefix)
    names = cluster.create_gpu_nodes(pool, nodes, gpus, labels={POOL_LABEL: pool},
                                     taints=[CORDON])
    return pool, names


def uncordon(cluster: Any, nodes: list[str]) -> None:
    for name in nodes:
        cluster.core.patch_node(name, {"spec": {"taints": None}})


def create_gangs(
    cluster: Any, namespace: str, pool: str, gangs: int, size: int, *, prefix: str = "g"
) -> int:
    """`gangs` gangs `PREFIX0..` of `size` 1-GPU pods (explicit annotations); returns
    the pod count."""
    for g in range(gangs):
        for i in range(size):
            pod = gang_pod(f"{prefix}{g}-w{i:03d}", pool, gang=f"{prefix}{g}", min_member=size)
            cluster.core.create_namespaced_pod(namespace, pod)
    return gangs * size


def pods(cluster: Any, namespace: str) -> list[Any]:
    return list(cluster.core.list_namespaced_pod(namespace).items)


def gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or [])


def count_gated(cluster: Any, namespace: str) -> int:
    return sum(1 for p in pods(cluster, namespace) if gated(p))


def settled_gated(cluster: Any, namespace: str, quiet: float = 1.5) -> int:
    """The gated count once it stops changing.

    A process killed mid-burst may have sent PATCHes the API server is still applying; a
    count read at the instant of death would miss them.
    """
    last = count_gated(cluster, namespace)
    while True:
        time.sleep(quiet)
        now = count_gated(cluster, namespace)
        if now == last:
            return now
        last = now


def count_bound(cluster: Any, namespace: str) -> int:
    return sum(1 for p in pods(cluster, namespace) if p.spec.node_name)


def wait_all_gated(cluster: Any, namespace: str, total: int) -> None:
    cluster.wait_for(lambda: count_gated(cluster, namespace) == total, timeout=120,
                     message=f"{total} pods created and gated")


def wait_released_and_bound(cluster: Any, namespace: str, total: int, timeout: float) -> None:
    cluster.wait_for(lambda: count_gated(cluster, namespace) == 0, timeout=timeout,
                     message="every gate lifted")
    cluster.wait_for(lambda: count_bound(cluster, namespace) == total, timeout=timeout,
                     message=f"all {total} pods bound")


def events(cluster: Any, namespace: str) -> list[dict[str, Any]]:
    """gangkeeper's Events in `namespace`, as dicts (kwok's have no eventTime, which the
    Python client's model refuses)."""
    done = cluster.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json")
    found = json.loads(done.stdout)["items"]
    return [e for e in found if e.get("reportingController") == EVENT_SOURCE]


def wait_dead(faults: Faults, name: str, timeout: float = 60.0) -> float:
    """Wait until the process `name` is gone (or a zombie); the monotonic time then."""
    deadline = time.monotonic() + timeout
    while process_state(faults, name) not in ("", "Z"):
        assert time.monotonic() < deadline, f"{name} still running after {timeout}s"
        time.sleep(0.05)
    return time.monotonic()


def wait_stopped(faults: Faults, name: str, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while process_state(faults, name) != "T":
        assert time.monotonic() < deadline, f"{name} not stopped after {timeout}s"
        time.sleep(0.05)
    return time.monotonic()
