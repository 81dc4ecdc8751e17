"""Kueue for quota, gangkeeper for placement, against a real Kueue (v0.17.0).

A sandbox apart from the session's, shared with tests/e2e/test_kuberay.py
(`kwok_kueue_kuberay` in conftest): the control plane, kwok, Kueue's manager with
its own webhooks (`webhook/sandbox/kueue.py`), KubeRay's operator and gangkeeper.
Kueue is not in the session's sandbox: its webhooks would answer every other test's
Jobs and TrainJobs.

Each test makes its own pool of 4 x 8-GPU nodes and its own ClusterQueue (one
ResourceFlavor, a quota of `nvidia.com/gpu` only: the test pods request nothing
else) admitting only the test's namespace, with a LocalQueue `training` there.
Objects are `kueue.x-k8s.io/v1beta2`, the version v0.17.0 stores.

Kueue admits by quota (the Job is unsuspended once its Workload fits the
ClusterQueue); it does not look at nodes. gangkeeper holds the admitted Job's pods
until all of them fit, and refuses at creation a Job that no node set could hold.
Kueue's pod groups are left to Kueue (`onConflict: skip`, the default); a partially
admitted Job is one gang of the pods Kueue admitted; a Job Kueue preempts loses all
its pods and the preemptor binds whole.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from builders.cluster import GPU, POOL_LABEL, gang_pod, indexed_job, unique
from conftest import Cluster

from gangkeeper.policies.names import GANG_LABEL, GATE
from gangkeeper.policies.recognizers.job import KUEUE_MIN_PARALLELISM
from gangkeeper.policies.recognizers.kueue import GROUP_LABEL, TOTAL_ANNOTATION

pytestmark = pytest.mark.e2e

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: The gates Kueue v0.17.0's pod webhook puts on a pod it suspends
#: (`pkg/controller/jobs/pod/pod_webhook.go` Default): its admission gate, and the
#: topology gate too, as TopologyAwareScheduling is on by default (Beta since v0.14,
#: `pkg/features/kube_features.go`). On admission without a topology request it lifts
#: both (`pod_controller.go` prepare).
ADMISSION_GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
LOCAL_QUEUE = "training"
FLAVOR = "default-flavor"
NODES, GPUS_PER_NODE = 4, 8
#: Seconds the "none bound" and "two bound" claims are sampled for, after Kueue admitted.
HOLD_SECONDS = 10


@pytest.fixture(scope="module")
def kueued(kwok_kueue_kuberay: Cluster) -> Cluster:
    """The sandbox with kwok, Kueue (and KubeRay) and gangkeeper, no GPU node at the
    start, with the tests' ResourceFlavor."""
    kwok_kueue_kuberay.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": FLAVOR},
    }))
    return kwok_kueue_kuberay


def queue(
    cluster: Cluster, namespace: str, gpus: int, preemption: dict[str, str] | None = None
) -> None:
    """A ClusterQueue with `gpus` GPUs of quota for `namespace` alone, and its
    LocalQueue `training`."""
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": namespace},
            "spec": {
                **({"preemption": preemption} if preemption else {}),
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": namespace}
                },
                "resourceGroups": [{
                    "coveredResources": [GPU],
                    "flavors": [{
                        "name": FLAVOR,
                        "resources": [{"name": GPU, "nominalQuota": gpus}],
                    }],
                }],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": namespace},
        },
    ]))
    # The LocalQueue is usable once Kueue reports it Active.
    cluster.wait_for(
        lambda: "True" in cluster.kubectl(
            "get", "localqueue", LOCAL_QUEUE, "-n", namespace,
            "-o", "jsonpath={.status.conditions[?(@.type=='Active')].status}", check=False,
        ).stdout,
        timeout=60, message=f"LocalQueue {namespace}/{LOCAL_QUEUE} Active",
    )


def queued_job(name: str, namespace: str, pool: str, *, workers: int) -> dict[str, Any]:
    job = indexed_job(name, namespace, pool, workers=workers, gpus=GPUS_PER_NODE)
    job["metadata"]["labels"] = {QUEUE_LABEL: LOCAL_QUEUE}
    return job


def admitted(cluster: Cluster, namespace: str, name: str) -> bool:
    """Kueue admitted the Job: it unsuspended it."""
    job = cluster.batch.read_namespaced_job(name, namespace)
    return job.spec.suspend is False


def job_pods(cluster: Cluster, namespace: str, name: str) -> list[Any]:
    return list(
        cluster.core.list_namespaced_pod(
            namespace, label_selector=f"batch.kubernetes.io/job-name={name}"
        ).items
    )


def bound(cluster: Cluster, namespace: str, name: str) -> int:
    return bound_in(job_pods(cluster, namespace, name))


def bound_in(pods: list[Any]) -> int:
    return sum(1 for p in pods if p.spec.node_name)


def samples_of(count: Callable[[], int]) -> list[int]:
    """`count()` sampled for HOLD_SECONDS."""
    out = []
    end = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < end:
        out.append(count())
        time.sleep(0.5)
    return out


def samples(cluster: Cluster, namespace: str, name: str) -> list[int]:
    """The number of the Job's bound pods, sampled for HOLD_SECONDS."""
    return samples_of(lambda: bound(cluster, namespace, name))


@pytest.fixture
def fleet(kueued: Cluster) -> Iterator[tuple[str, list[str]]]:
    """4 x 8-GPU nodes of the test's own pool."""
    pool = unique("kq")
    nodes = kueued.create_gpu_nodes(pool, NODES, GPUS_PER_NODE, labels={POOL_LABEL: pool})
    yield pool, nodes


def occupy(cluster: Cluster, pool: str, nodes: list[str]) -> tuple[str, list[str]]:
    """4 GPUs of pods Kueue does not manage (no queue label) on each of `nodes`, in a
    namespace of their own that gangkeeper does not serve; returns it and the pods."""
    namespace = cluster.new_namespace(opted_in=False)
    names = []
    for node in nodes:
        pod = gang_pod(unique("other"), pool, gpus=4)
        pod["spec"]["nodeName"] = node
        cluster.core.create_namespaced_pod(namespace, pod)
        names.append(pod["metadata"]["name"])
    cluster.wait_for(
        lambda: all(
            cluster.core.read_namespaced_pod(n, namespace).status.phase == "Running"
            for n in names
        ),
        timeout=60, message="the pods Kueue does not manage Running",
    )
    return namespace, names


@pytest.fixture
def namespaces(kueued: Cluster) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        kueued.kubectl("delete", "clusterqueue", name, "--ignore-not-found", "--wait=false")
        kueued.delete_namespace(name)


def admitted_beside_others(
    cluster: Cluster, fleet: tuple[str, list[str]], namespaces: list[str], *, opted_in: bool
) -> tuple[str, str, str, list[str]]:
    """Scenario 1's start: two of the four nodes half taken by pods Kueue does not
    manage, a 3 x 8-GPU Job queued with 32 GPUs of quota, and Kueue admitting it.
    (namespace, Job name, the other pods' namespace, their names)."""
    pool, nodes = fleet
    others, blockers = occupy(cluster, pool, nodes[:2])
    namespaces.append(others)
    namespace = cluster.new_namespace(opted_in=opted_in)
    namespaces.append(namespace)
    queue(cluster, namespace, gpus=NODES * GPUS_PER_NODE)
    name = unique("gang" if opted_in else "quota")
    cluster.batch.create_namespaced_job(namespace, queued_job(name, namespace, pool, workers=3))
    cluster.wait_for(lambda: admitted(cluster, namespace, name), timeout=60,
                     message="Kueue admitting the Job (24 of 32 GPUs of quota)")
    return namespace, name, others, blockers


def test_without_gangkeeper_kueue_admits_by_quota_and_two_of_three_workers_bind(
    kueued: Cluster, fleet: tuple[str, list[str]], namespaces: list[str]
) -> None:
    namespace, name, _, _ = admitted_beside_others(kueued, fleet, namespaces, opted_in=False)
    kueued.wait_for(lambda: bound(kueued, namespace, name) == 2, timeout=60,
                    message="two workers bound on the two free nodes")
    counts = samples(kueued, namespace, name)

    assert set(counts) == {2}, f"bound workers over {HOLD_SECONDS}s: {counts}"
    pending = [p for p in job_pods(kueued, namespace, name) if not p.spec.node_name]
    assert len(pending) == 1, [p.metadata.name for p in pending]


def test_with_gangkeeper_an_admitted_job_binds_none_until_all_fit_then_all(
    kueued: Cluster, fleet: tuple[str, list[str]], namespaces: list[str]
) -> None:
    namespace, name, others, blockers = admitted_beside_others(
        kueued, fleet, namespaces, opted_in=True)
    kueued.wait_for(lambda: len(job_pods(kueued, namespace, name)) == 3, timeout=60,
                    message="the Job's three workers created")
    counts = samples(kueued, namespace, name)

    assert set(counts) == {0}, f"bound workers over {HOLD_SECONDS}s: {counts}"
    assert admitted(kueued, namespace, name), "Kueue took its admission back"

    for pod in blockers:
        kueued.core.delete_namespaced_pod(pod, others, grace_period_seconds=0)
    kueued.wait_for(lambda: bound(kueued, namespace, name) == 3, timeout=90,
                    message="all three workers bound once room freed")
    kueued.wait_for(
        lambda: all(p.status.phase == "Running" for p in job_pods(kueued, namespace, name)),
        timeout=60, message="all three workers Running",
    )
    assert len({p.spec.node_name for p in job_pods(kueued, namespace, name)}) == 3


def test_a_kueue_job_that_can_never_fit_the_fleet_is_refused_with_the_numbers(
    kueued: Cluster, fleet: tuple[str, list[str]], namespaces: list[str]
) -> None:
    pool, _ = fleet
    namespace = kueued.new_namespace(opted_in=True)
    namespaces.append(namespace)
    # Quota for 64 GPUs on a pool of 32: Kueue would admit it, and no node set holds it.
    queue(kueued, namespace, gpus=2 * NODES * GPUS_PER_NODE)
    workers = NODES + 1
    job = queued_job(unique("never"), namespace, pool, workers=workers)
    body = yaml.safe_dump(job)

    for extra in (("--dry-run=server",), ()):
        done = kueued.kubectl("create", *extra, "-f", "-", input=body, check=False)

        assert done.returncode != 0, f"admitted a Job that cannot fit ({extra}):\n{done.stdout}"
        message = done.stderr
        assert "denied the request" in message, message
        demand, capacity = workers * GPUS_PER_NODE, NODES * GPUS_PER_NODE
        assert re.search(rf"\b{demand}\b", message), f"demand {demand} not named: {message}"
        assert re.search(rf"\b{capacity}\b", message), f"capacity {capacity} not named: {message}"
        assert GPU in message, message
    got = kueued.kubectl("get", "job", job["metadata"]["name"], "-n", namespace, check=False)
    assert "NotFound" in got.stderr, "a refused Job was created"
    workloads = kueued.kubectl("get", "workloads.kueue.x-k8s.io", "-n", namespace, "-o", "name")
    assert workloads.stdout.strip() == "", f"Kueue holds a Workload for it: {workloads.stdout}"


def group_pods(cluster: Cluster, namespace: str, group: str) -> list[Any]:
    return list(
        cluster.core.list_namespaced_pod(namespace, label_selector=f"{GROUP_LABEL}={group}").items
    )


def gates(pod: Any) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or []]


def workload_conditions(cluster: Cluster, namespace: str) -> dict[str, dict[str, str]]:
    """Each Workload's conditions in `namespace`: {workload: {type: status}}."""
    done = cluster.kubectl("get", "workloads.kueue.x-k8s.io", "-n", namespace, "-o", "json")
    return {
        w["metadata"]["name"]: {
            c["type"]: c["status"] for c in (w.get("status") or {}).get("conditions") or []
        }
        for w in json.loads(done.stdout)["items"]
    }


def test_a_kueue_pod_group_is_left_to_kueue_which_binds_it_whole_once_all_are_there_within_quota(
    kueued: Cluster, fleet: tuple[str, list[str]], namespaces: list[str]
) -> None:
    # onConflict: skip (the default): gangkeeper neither gates nor labels the pods;
    # Kueue's own gates hold them until the group is whole and its quota admits it.
    pool, _ = fleet
    namespace = kueued.new_namespace(opted_in=True)
    namespaces.append(namespace)
    queue(kueued, namespace, gpus=2 * GPUS_PER_NODE)  # 16 GPUs: less than the group's 24
    group, total = unique("group"), 3
    for i in range(total):
        pod = gang_pod(
            f"{group}-{i}", pool, gpus=GPUS_PER_NODE,
            labels={QUEUE_LABEL: LOCAL_QUEUE, GROUP_LABEL: group},
        )  # fmt: skip
        pod["metadata"]["annotations"][TOTAL_ANNOTATION] = str(total)
        kueued.core.create_namespaced_pod(namespace, pod)
        if i == total - 2:
            two_of_three = samples_of(lambda: bound_in(group_pods(kueued, namespace, group)))
            assert set(two_of_three) == {0}, f"bound with 2 of {total} there: {two_of_three}"
            assert workload_conditions(kueued, namespace) == {}, "a Workload before all came"

    pods = group_pods(kueued, namespace, group)
    assert {p.metadata.name: gates(p) for p in pods} == {
        p.metadata.name: [ADMISSION_GATE, TOPOLOGY_GATE] for p in pods
    }
    assert not any(GANG_LABEL in (p.metadata.labels or {}) for p in pods), "gangkeeper labelled"
    kueued.wait_for(
        lambda: workload_conditions(kueued, namespace).get(group, {}).get("QuotaReserved")
        == "False",
        timeout=60, message="Kueue's Workload for the whole group, held for quota",
    )
    over_quota = samples_of(lambda: bound_in(group_pods(kueued, namespace, group)))
    assert set(over_quota) == {0}, f"bound over quota: {over_quota}"

    kueued.kubectl(
        "patch", "clusterqueue", namespace, "--type=json", "-p", json.dumps([{
            "op": "replace",
            "path": "/spec/resourceGroups/0/flavors/0/resources/0/nominalQuota",
            "value": NODES * GPUS_PER_NODE,
        }]),
    )  # fmt: skip
    kueued.wait_for(lambda: bound_in(group_pods(kueued, namespace, group)) == total,
                    timeout=90, message="the whole group bound once the quota admits it")
    pods = group_pods(kueued, namespace, group)
    assert {p.metadata.name: gates(p) for p in pods} == {p.metadata.name: [] for p in pods}
    assert all(GATE not in gates(p) for p in pods)
    assert len({p.spec.node_name for p in pods}) == total


def test_a_partially_admitted_job_is_one_gang_of_the_pods_kueue_admitted(
    kueued: Cluster, fleet: tuple[str, list[str]], namespaces: list[str]
) -> None:
    # Kueue admits 3 of 4 workers (24 GPUs of quota, job-min-parallelism 2) and sets
    # the Job's parallelism to 3; two nodes are free: gangkeeper binds none of the 3
    # (its minimum is what Kueue admitted, not the annotation's 2) until all 3 fit.
    pool, nodes = fleet
    others, blockers = occupy(kueued, pool, nodes[:2])
    namespaces.append(others)
    namespace = kueued.new_namespace(opted_in=True)
    namespaces.append(namespace)
    queue(kueued, namespace, gpus=3 * GPUS_PER_NODE)
    name = unique("partial")
    job = queued_job(name, namespace, pool, workers=4)
    job["metadata"]["annotations"] = {KUEUE_MIN_PARALLELISM: "2"}
    kueued.batch.create_namespaced_job(namespace, job)

    kueued.wait_for(lambda: admitted(kueued, namespace, name), timeout=60,
                    message="Kueue admitting the Job partially")
    assert kueued.batch.read_namespaced_job(name, namespace).spec.parallelism == 3
    kueued.wait_for(lambda: len(job_pods(kueued, namespace, name)) == 3, timeout=60,
                    message="the three admitted workers created")
    counts = samples(kueued, namespace, name)

    assert set(counts) == {0}, f"bound workers over {HOLD_SECONDS}s: {counts}"
    for pod in blockers:
        kueued.core.delete_namespaced_pod(pod, others, grace_period_seconds=0)
    kueued.wait_for(lambda: bound(kueued, namespace, name) == 3, timeout=90,
                    message="all three admitted workers bound once room freed")
    assert len(job_pods(kueued, namespace, name)) == 3


def test_kueue_preempting_an_admitted_job_takes_its_gang_whole_and_the_preemptor_binds_whole(
    kueued: Cluster, fleet: tuple[str, list[str]], namespaces: list[str]
) -> None:
    pool, _ = fleet
    kueued.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        for name, value in (("e2e-low", 100), ("e2e-high", 1000))
    ]))  # fmt: skip
    namespace = kueued.new_namespace(opted_in=True)
    namespaces.append(namespace)
    queue(kueued, namespace, gpus=NODES * GPUS_PER_NODE,
          preemption={"withinClusterQueue": "LowerPriority"})
    low, high = unique("low"), unique("high")
    low_job = queued_job(low, namespace, pool, workers=3)
    low_job["metadata"]["labels"][PRIORITY_LABEL] = "e2e-low"
    kueued.batch.create_namespaced_job(namespace, low_job)
    kueued.wait_for(lambda: bound(kueued, namespace, low) == 3, timeout=90,
                    message="the low Job's three workers bound")

    # 16 more GPUs than the 8 of quota left: Kueue evicts the low Workload.
    high_job = queued_job(high, namespace, pool, workers=2)
    high_job["metadata"]["labels"][PRIORITY_LABEL] = "e2e-high"
    kueued.batch.create_namespaced_job(namespace, high_job)

    kueued.wait_for(lambda: bound(kueued, namespace, high) == 2, timeout=120,
                    message="the high Job's two workers bound")
    kueued.wait_for(lambda: job_pods(kueued, namespace, low) == [], timeout=60,
                    message="the low Job's pods gone")
    assert not admitted(kueued, namespace, low), "the preempted Job is running again"
    conditions = workload_conditions(kueued, namespace)
    low_workload = next(v for k, v in conditions.items() if low in k)
    assert low_workload.get("Preempted") == "True", conditions
    pods = kueued.core.list_namespaced_pod(namespace).items
    assert {p.metadata.name: gates(p) for p in pods} == {p.metadata.name: [] for p in pods}
    assert all(p.spec.node_name for p in pods), [p.metadata.name for p in pods]
    assert len({p.spec.node_name for p in job_pods(kueued, namespace, high)}) == 2
