"""Ray clusters as gangs, against the real KubeRay ray-operator (v1.5.0).

A sandbox apart from the session's, shared with tests/e2e/test_kueue.py
(`kwok_kueue_kuberay` in conftest): the control plane, kwok, KubeRay's operator
(without its webhook, `ENABLE_WEBHOOKS` unset), Kueue (which leaves these Ray objects
alone: they carry no `kueue.x-k8s.io/queue-name`) and gangkeeper, no node at the start.
Each test makes its own pool of kwok nodes and its Ray pods select it, so one test's
pods never take another's room. The operator, not the test, creates every pod here:
the head and worker pods from `headGroupSpec` and `workerGroupSpecs`
(`controllers/ray/raycluster_controller.go`, `reconcilePods`), and for a RayJob in
the default `K8sJobMode` its submitter, a batch/v1 Job it creates once the cluster
is `ready` (`rayjob_controller.go`, `createK8sJobIfNeed`). kwok makes bound pods
Running and Ready; no Ray process, and no autoscaler sidecar, ever runs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from builders.cluster import GPU, POOL_LABEL, unique
from conftest import Cluster

from gangkeeper.policies.names import GATE

pytestmark = pytest.mark.e2e

NODES, GPUS_PER_NODE = 2, 4
TIMEOUT = 90
IMAGE = "registry.invalid/e2e/ray:2.46.0"


@pytest.fixture(scope="module")
def rayed(kwok_kueue_kuberay: Cluster) -> Cluster:
    """The sandbox with kwok, KubeRay's operator (and Kueue) and gangkeeper, no node."""
    return kwok_kueue_kuberay


@pytest.fixture
def namespace(rayed: Cluster) -> Iterator[str]:
    name = rayed.new_namespace(opted_in=True)
    yield name
    rayed.delete_namespace(name)


@pytest.fixture
def pool(rayed: Cluster) -> Iterator[tuple[str, list[str]]]:
    """This test's own nodes: 2 x 4 GPUs."""
    name = unique("ray")
    nodes = rayed.create_gpu_nodes(name, NODES, GPUS_PER_NODE, labels={POOL_LABEL: name})
    yield name, nodes
    rayed.delete_created_nodes()


def _template(pool: str, container: str, requests: dict[str, str]) -> dict[str, Any]:
    return {
        "spec": {
            "nodeSelector": {POOL_LABEL: pool},
            "containers": [{
                "name": container,
                "image": IMAGE,
                "resources": {"requests": dict(requests), "limits": dict(requests)},
            }],
        }
    }


def cluster_spec(pool: str, *, workers: int, minimum: int = 0, maximum: int = 4) -> dict[str, Any]:
    """A CPU-only head and one group of `workers` 4-GPU workers on `pool`."""
    return {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": _template(pool, "ray-head", {"cpu": "1", "memory": "2Gi"}),
        },
        "workerGroupSpecs": [{
            "groupName": "gpu",
            "replicas": workers,
            "minReplicas": minimum,
            "maxReplicas": maximum,
            "rayStartParams": {},
            "template": _template(pool, "ray-worker", {"cpu": "1", GPU: str(GPUS_PER_NODE)}),
        }],
    }


def ray_cluster(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def blocker(name: str, namespace: str, node: str, gpus: int) -> dict[str, Any]:
    """A pod bound to `node` by name (no scheduler, no gangkeeper) holding `gpus`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "hold", "image": IMAGE,
                "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
            }],
        },
    }


def ray_pods(cluster: Cluster, namespace: str, ray_cluster_name: str) -> list[Any]:
    return cluster.core.list_namespaced_pod(
        namespace, label_selector=f"ray.io/cluster={ray_cluster_name}"
    ).items


def ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())


def gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or ())


def apply(cluster: Cluster, body: dict[str, Any]) -> None:
    cluster.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(body))


def test_a_ray_cluster_binds_nothing_until_all_of_it_fits_then_all_of_it(
    rayed: Cluster, namespace: str, pool: tuple[str, list[str]]
) -> None:
    name, nodes = pool
    plain = rayed.new_namespace(opted_in=False)
    try:
        # 6 of the pool's 8 GPUs free: one 4-GPU worker would fit, the pair would not.
        apply(rayed, blocker("hold", plain, nodes[0], 2))
        rc = unique("rc")
        apply(rayed, ray_cluster(rc, namespace, cluster_spec(name, workers=2)))
        rayed.wait_for(lambda: len(ray_pods(rayed, namespace, rc)) == 3, timeout=TIMEOUT,
                       message="KubeRay creating the head and two workers")
        # Sampled over time: a partial start would show as any one pod bound.
        end = time.monotonic() + 10
        while time.monotonic() < end:
            pods = ray_pods(rayed, namespace, rc)
            bound = [p.metadata.name for p in pods if p.spec.node_name]
            assert not bound, f"part of the Ray cluster bound with 6 GPUs free: {bound}"
            time.sleep(0.5)
        pods = ray_pods(rayed, namespace, rc)
        assert len(pods) == 3 and all(gated(p) for p in pods), [p.spec for p in pods]
        assert {p.metadata.labels.get(GATE) for p in pods} == {rc}

        rayed.core.delete_namespaced_pod("hold", plain, grace_period_seconds=0)

        def all_ready() -> bool:
            now = ray_pods(rayed, namespace, rc)
            return len(now) == 3 and all(p.spec.node_name and ready(p) for p in now)

        rayed.wait_for(all_ready, timeout=TIMEOUT, message="all three Ray pods bound and Ready")
        pods = ray_pods(rayed, namespace, rc)
        roles = sorted(p.metadata.labels["ray.io/node-type"] for p in pods)
        assert roles == ["head", "worker", "worker"]
        assert {p.spec.node_name for p in pods} <= set(nodes)
        state = rayed.custom.get_namespaced_custom_object(
            "ray.io", "v1", namespace, "rayclusters", rc
        )
        rayed.wait_for(
            lambda: rayed.custom.get_namespaced_custom_object(
                "ray.io", "v1", namespace, "rayclusters", rc
            ).get("status", {}).get("state") == "ready",
            timeout=TIMEOUT, message=f"KubeRay calling {rc} ready (was {state.get('status')})",
        )
    finally:
        rayed.delete_namespace(plain)


def test_a_ray_jobs_cluster_is_one_gang_and_its_submitter_runs_outside_it(
    rayed: Cluster, namespace: str, pool: tuple[str, list[str]]
) -> None:
    name, _ = pool
    rj = unique("rj")
    job = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": rj, "namespace": namespace},
        "spec": {
            "entrypoint": "python -c 'print(1)'",
            "rayClusterSpec": cluster_spec(name, workers=2),
        },
    }
    apply(rayed, job)

    def cluster_name() -> str:
        body = rayed.custom.get_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", rj)
        return str(body.get("status", {}).get("rayClusterName") or "")

    rc = rayed.wait_for(cluster_name, timeout=TIMEOUT, message=f"RayJob {rj} naming its cluster")

    def cluster_ready() -> bool:
        pods = ray_pods(rayed, namespace, rc)
        return len(pods) == 3 and all(p.spec.node_name and ready(p) for p in pods)

    rayed.wait_for(cluster_ready, timeout=TIMEOUT, message="the RayJob's three Ray pods Ready")
    pods = ray_pods(rayed, namespace, rc)
    # One gang, named after the RayJob (as KubeRay's own PodGroup is).
    assert {p.metadata.labels.get(GATE) for p in pods} == {rj}
    [owner] = pods[0].metadata.owner_references
    assert (owner.kind, owner.name) == ("RayCluster", rc)

    def submitter() -> list[Any]:
        return rayed.core.list_namespaced_pod(
            namespace, label_selector=f"batch.kubernetes.io/job-name={rj}"
        ).items

    # K8sJobMode: KubeRay creates the batch Job only once the cluster is ready.
    [pod] = rayed.wait_for(submitter, timeout=TIMEOUT, message="the submitter Job's pod")
    rayed.wait_for(lambda: all(p.spec.node_name for p in submitter()), timeout=TIMEOUT,
                   message="the submitter pod bound")
    [pod] = submitter()
    assert GATE not in (pod.metadata.labels or {}), pod.metadata.labels
    assert not gated(pod)
    [job_owner] = rayed.batch.read_namespaced_job(rj, namespace).metadata.owner_references
    assert (job_owner.kind, job_owner.name) == ("RayJob", rj)


def test_an_autoscaling_ray_cluster_starts_at_its_minimum(
    rayed: Cluster, namespace: str, pool: tuple[str, list[str]]
) -> None:
    name, nodes = pool
    plain = rayed.new_namespace(opted_in=False)
    try:
        # Room for the head and one worker: the minimum (minReplicas 1, plus the head).
        apply(rayed, blocker("hold", plain, nodes[0], GPUS_PER_NODE))
        rc = unique("auto")
        spec = cluster_spec(name, workers=2, minimum=1, maximum=3)
        spec["enableInTreeAutoscaling"] = True
        apply(rayed, ray_cluster(rc, namespace, spec))

        def minimum_running() -> list[Any]:
            pods = ray_pods(rayed, namespace, rc)
            up = [p for p in pods if p.spec.node_name and ready(p)]
            return up if len(pods) == 3 and len(up) == 2 else []

        up = rayed.wait_for(minimum_running, timeout=TIMEOUT,
                            message="the head and one worker Running, one worker waiting")
        assert sorted(p.metadata.labels["ray.io/node-type"] for p in up) == ["head", "worker"]
        [waiting] = [p for p in ray_pods(rayed, namespace, rc) if not p.spec.node_name]
        assert gated(waiting) or waiting.status.phase == "Pending"
        [head] = [p for p in up if p.metadata.labels["ray.io/node-type"] == "head"]
        # KubeRay's autoscaler sidecar is in the head (it never runs under kwok).
        assert "autoscaler" in {c.name for c in head.spec.containers}

        rayed.core.delete_namespaced_pod("hold", plain, grace_period_seconds=0)
        rayed.wait_for(
            lambda: all(p.spec.node_name and ready(p) for p in ray_pods(rayed, namespace, rc)),
            timeout=TIMEOUT, message="the worker beyond the minimum released once it fits",
        )
    finally:
        rayed.delete_namespace(plain)


def test_a_ray_cluster_that_can_never_fit_is_refused_at_creation_and_on_dry_run(
    rayed: Cluster, namespace: str, pool: tuple[str, list[str]]
) -> None:
    name, _ = pool
    workers = NODES + 1
    rc = unique("never")
    body = yaml.safe_dump(ray_cluster(rc, namespace, cluster_spec(name, workers=workers)))

    for extra in (("apply", "--dry-run=server"), ("create",)):
        done = rayed.kubectl(*extra, "-f", "-", input=body, check=False)

        assert done.returncode != 0, f"admitted a cluster that cannot fit ({extra}):\n{done.stdout}"
        message = done.stderr
        assert "denied the request" in message, message
        demand, capacity = workers * GPUS_PER_NODE, NODES * GPUS_PER_NODE
        assert re.search(rf"\b{demand}\b", message), f"demand {demand} not named: {message}"
        assert re.search(rf"\b{capacity}\b", message), f"capacity {capacity} not named: {message}"
        assert GPU in message, message
    got = rayed.kubectl("get", "rayclusters.ray.io", rc, "-n", namespace, check=False)
    assert "NotFound" in got.stderr, "a refused RayCluster was created"
    assert ray_pods(rayed, namespace, rc) == []


def test_a_head_without_gpus_is_still_the_gangs(
    rayed: Cluster, namespace: str, pool: tuple[str, list[str]]
) -> None:
    """The CPU-only head passes the webhooks' filter through its ray.io/ labels: it
    is gated with the workers, not bound alone."""
    name, nodes = pool
    plain = rayed.new_namespace(opted_in=False)
    try:
        for i, node in enumerate(nodes):
            apply(rayed, blocker(f"hold-{i}", plain, node, GPUS_PER_NODE))
        rc = unique("head")
        apply(rayed, ray_cluster(rc, namespace, cluster_spec(name, workers=1)))
        rayed.wait_for(lambda: len(ray_pods(rayed, namespace, rc)) == 2, timeout=TIMEOUT,
                       message="KubeRay creating the head and a worker")
        time.sleep(3)
        [head] = [p for p in ray_pods(rayed, namespace, rc)
                  if p.metadata.labels["ray.io/node-type"] == "head"]
        assert not head.spec.node_name, "the CPU-only head bound before its worker could"
        assert gated(head)
        assert head.metadata.labels[GATE] == rc
    finally:
        rayed.delete_namespace(plain)
