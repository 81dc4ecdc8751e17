"""Priorities that hold for whole gangs (issue 24), on the sandbox: real PriorityClasses
(the API server's Priority admission plugin copies `priority` and `preemptionPolicy`
into each pod), the real Job controller, kube-scheduler, the disruption controller
(PodDisruptionBudget status) and the Eviction API; kwok plays the kubelet.

A gated gang never reaches kube-scheduler's preemption, so gangkeeper preempts for it:
lower-priority gangs are requeued whole (their Jobs suspended and resumed, so
`backoffLimit: 0` does not fail them), pods of no gang are evicted so budgets hold.
No API server, scheduler or controller is mocked.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, unique
from builders.controllers import gpu_template, is_bound, is_gated
from kubernetes import client

from gangkeeper.policies.names import REQUEUES_ANNOTATION

LOW, MID, HIGH = 100, 500, 1000


@pytest.fixture
def classes(cluster: Any) -> Iterator[dict[str, str]]:
    """PriorityClasses low, mid, high and high-never (preemptionPolicy: Never)."""
    api = client.SchedulingV1Api(cluster.api_client)
    tag = unique("pc")
    made = {
        "low": (LOW, "PreemptLowerPriority"),
        "mid": (MID, "PreemptLowerPriority"),
        "high": (HIGH, "PreemptLowerPriority"),
        "never": (HIGH, "Never"),
    }
    names = {key: f"{tag}-{key}" for key in made}
    for key, (value, policy) in made.items():
        api.create_priority_class({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": names[key]}, "value": value, "preemptionPolicy": policy,
        })
    yield names
    for name in names.values():
        api.delete_priority_class(name)


def job(name: str, pool: str, workers: int, gpus: int, priority_class: str, *,
        run_for: str | None = None, backoff_limit: int = 0) -> dict[str, Any]:
    template = gpu_template(pool, gpus, run_for=run_for)
    template["spec"]["priorityClassName"] = priority_class
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completionMode": "Indexed", "completions": workers,
                 "parallelism": workers, "backoffLimit": backoff_limit,
                 "template": template},
    }


def pods_of(cluster: Any, namespace: str, name: str) -> list[Any]:
    found = cluster.core.list_namespaced_pod(
        namespace, label_selector=f"batch.kubernetes.io/job-name={name}").items
    return [p for p in found if not p.metadata.deletion_timestamp]


def all_bound(cluster: Any, namespace: str, name: str, count: int) -> bool:
    found = pods_of(cluster, namespace, name)
    return len(found) == count and all(is_bound(p) for p in found)


def events(cluster: Any, namespace: str, reason: str) -> list[Any]:
    return [e for e in cluster.core.list_namespaced_event(namespace).items
            if e.reason == reason]


def failed(cluster: Any, namespace: str, name: str, *, any_pod: bool = False) -> bool:
    """The Job failed (its Failed condition), or with `any_pod` counted a failed pod."""
    status = cluster.batch.read_namespaced_job(name, namespace).status
    return (any_pod and bool(status.failed)) or any(
        c.type == "Failed" and c.status == "True" for c in status.conditions or ())


def fill_with_low_jobs(cluster: Any, namespace: str, classes: dict[str, str], prefix: str
                       ) -> tuple[str, list[str]]:
    """Scenario 1's start: four low-priority Jobs of 2 x 4 GPUs fill a new pool of
    4 x 8 GPUs, each bound whole; the pool and the Jobs' names."""
    pool = unique(prefix)
    cluster.create_gpu_nodes(pool, 4, 8, labels={POOL_LABEL: pool})
    lows = [f"low-{i}" for i in range(4)]
    for name in lows:
        cluster.batch.create_namespaced_job(namespace, job(name, pool, 2, 4, classes["low"]))
    for name in lows:
        cluster.wait_for(lambda n=name: all_bound(cluster, namespace, n, 2),
                         timeout=60, message=f"{name} bound whole")
    return pool, lows


class PartlyBound:
    """Watches Jobs every 0.1 s: a Job whose live pods are some bound and some neither
    bound nor gated (released but not placed) for over a second is partly bound."""

    def __init__(self, cluster: Any, namespace: str, names: list[str]) -> None:
        self.cluster, self.namespace, self.names = cluster, namespace, names
        self.seen: list[str] = []
        self._since: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PartlyBound:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for name in self.names:
                pods = pods_of(self.cluster, self.namespace, name)
                bound = [p for p in pods if is_bound(p)]
                loose = [p for p in pods if not is_bound(p) and not is_gated(p)]
                if bound and loose:
                    since = self._since.setdefault(name, time.monotonic())
                    if time.monotonic() - since > 1.0 and name not in self.seen:
                        self.seen.append(name)
                else:
                    self._since.pop(name, None)


def test_a_high_job_preempts_exactly_two_low_jobs_whole_and_they_run_again_after(
    cluster: Any, gang_namespace: str, classes: dict[str, str]
) -> None:
    pool, lows = fill_with_low_jobs(cluster, gang_namespace, classes, "preempt")
    with PartlyBound(cluster, gang_namespace, lows) as watch:
        started = time.monotonic()
        cluster.batch.create_namespaced_job(
            gang_namespace, job("high", pool, 2, 8, classes["high"], run_for="8s"))
        cluster.wait_for(lambda: all_bound(cluster, gang_namespace, "high", 2), timeout=30,
                         message="the high Job bound whole")
        bound_after = time.monotonic() - started
        requeued = [
            n for n in lows
            if (cluster.batch.read_namespaced_job(n, gang_namespace).metadata.annotations
                or {}).get(REQUEUES_ANNOTATION) == "1"
        ]
        assert len(requeued) == 2, requeued
        # The two others ran on untouched.
        for name in set(lows) - set(requeued):
            assert all_bound(cluster, gang_namespace, name, 2), name
        # Once the high Job is done the requeued ones run again, whole.
        for name in requeued:
            cluster.wait_for(lambda n=name: all_bound(cluster, gang_namespace, n, 2),
                             timeout=90, message=f"requeued {name} bound again")
    assert watch.seen == [], f"partly bound: {watch.seen}"
    # Suspension deletes pods without counting them: not one failed pod.
    assert not [n for n in lows if failed(cluster, gang_namespace, n, any_pod=True)]
    assert bound_after <= 10.0, f"the high Job bound {bound_after:.1f}s after it was created"
    preempting = [e.message for e in events(cluster, gang_namespace, "GangPreempting")]
    assert any("preempting 2 gangs of lower priority (16 GPUs)" in m for m in preempting), (
        preempting)
    by_gang = {e.involved_object.name for e in events(cluster, gang_namespace, "PreemptedByGang")
               if e.involved_object.kind == "Job"}
    assert by_gang == set(requeued)


def _explain(cluster: Any, namespace: str, pod: str) -> str:
    """What `gangkeeper explain` prints about the pod's gang (stdout and stderr)."""
    done = subprocess.run(
        ["gangkeeper", "explain", f"pod/{pod}", "-n", namespace,
         "--kubeconfig", cluster.kubeconfig],
        capture_output=True, text=True, timeout=60, check=False,
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize("which", ["never", "equal"])
def test_never_and_equal_priority_preempt_nothing_and_explain_says_why(
    cluster: Any, gang_namespace: str, classes: dict[str, str], which: str
) -> None:
    pool = unique("nopreempt")
    cluster.create_gpu_nodes(pool, 2, 8, labels={POOL_LABEL: pool})
    low_class = classes["high"] if which == "equal" else classes["low"]
    high_class = classes["never"] if which == "never" else classes["high"]
    # Two workers each: a Job of one pod is no gang (kube-scheduler preempts for it).
    for name in ("low-0", "low-1"):
        cluster.batch.create_namespaced_job(gang_namespace, job(name, pool, 2, 4, low_class))
        cluster.wait_for(lambda n=name: all_bound(cluster, gang_namespace, n, 2),
                         timeout=60, message=f"{name} bound")
    cluster.batch.create_namespaced_job(gang_namespace, job("high", pool, 2, 4, high_class))
    cluster.wait_for(lambda: len(pods_of(cluster, gang_namespace, "high")) == 2, timeout=30,
                     message="the high Job's pods")
    time.sleep(5)  # several controller passes
    high = pods_of(cluster, gang_namespace, "high")
    assert all(is_gated(p) and not is_bound(p) for p in high)
    for name in ("low-0", "low-1"):
        assert all_bound(cluster, gang_namespace, name, 2), name
    assert events(cluster, gang_namespace, "PreemptedByGang") == []
    said = _explain(cluster, gang_namespace, high[0].metadata.name)
    if which == "never":
        assert "preemptionPolicy: Never" in said, said
    else:
        assert "preempting" not in said, said


def test_a_budget_keeps_its_pod_and_the_gang_waits_naming_it(
    cluster: Any, gang_namespace: str, plain_namespace: str, classes: dict[str, str]
) -> None:
    pool = unique("budget")
    nodes = cluster.create_gpu_nodes(pool, 2, 8, labels={POOL_LABEL: pool})
    policy = client.PolicyV1Api(cluster.api_client)
    for name, node, labels, klass in (("guarded", nodes[0], {"app": "db"}, "low"),
                                      ("plain", nodes[1], {"app": "batch"}, "mid")):
        spec = gpu_template(pool, 8)["spec"]
        spec["priorityClassName"] = classes[klass]
        spec["nodeSelector"]["kubernetes.io/hostname"] = node
        cluster.core.create_namespaced_pod(plain_namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels}, "spec": spec})
    policy.create_namespaced_pod_disruption_budget(plain_namespace, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    cluster.wait_for(
        lambda: all(is_bound(cluster.core.read_namespaced_pod(n, plain_namespace))
                    for n in ("guarded", "plain"))
        and (policy.read_namespaced_pod_disruption_budget("db", plain_namespace).status
             .observed_generation or 0) >= 1,
        timeout=60, message="both pods bound and the budget observed")
    # The lowest priority is the guarded pod's, but its budget allows no disruption:
    # the other one is evicted.
    cluster.batch.create_namespaced_job(gang_namespace, job("first", pool, 2, 4,
                                                            classes["high"]))
    cluster.wait_for(lambda: all_bound(cluster, gang_namespace, "first", 2), timeout=30,
                     message="the first high Job bound where the evicted pod was")
    names = {p.metadata.name for p in cluster.core.list_namespaced_pod(plain_namespace).items
             if not p.metadata.deletion_timestamp}
    assert names == {"guarded"}
    # Only the guarded pod is left: the next gang waits, and says which budget.
    cluster.batch.create_namespaced_job(gang_namespace, job("second", pool, 2, 4,
                                                            classes["high"]))
    cluster.wait_for(lambda: len(pods_of(cluster, gang_namespace, "second")) == 2,
                     timeout=30, message="the second high Job's pods")
    second, _ = pods_of(cluster, gang_namespace, "second")
    said = cluster.wait_for(
        lambda: (text := _explain(cluster, gang_namespace, second.metadata.name))
        and "PodDisruptionBudget" in text and text,
        timeout=30, message="explain naming the budget")
    assert f"PodDisruptionBudget {plain_namespace}/db allows no more disruptions" in said
    assert is_bound(cluster.core.read_namespaced_pod("guarded", plain_namespace))


def test_victims_on_nodes_the_preemptor_excludes_are_never_taken(
    cluster: Any, gang_namespace: str, classes: dict[str, str]
) -> None:
    pool = unique("where")
    cluster.create_gpu_nodes(f"{pool}-a", 1, 8, labels={POOL_LABEL: pool, "zone": "a"})
    cluster.create_gpu_nodes(f"{pool}-b", 1, 8, labels={POOL_LABEL: pool, "zone": "b"})
    lowest = job("lowest", pool, 2, 4, classes["low"])
    lowest["spec"]["template"]["spec"]["nodeSelector"]["zone"] = "a"
    other = job("other", pool, 2, 4, classes["mid"])
    other["spec"]["template"]["spec"]["nodeSelector"]["zone"] = "b"
    for made in (lowest, other):
        cluster.batch.create_namespaced_job(gang_namespace, made)
    for name in ("lowest", "other"):
        cluster.wait_for(lambda n=name: all_bound(cluster, gang_namespace, n, 2),
                         timeout=60, message=f"{name} bound")
    high = job("high", pool, 2, 4, classes["high"])
    high["spec"]["template"]["spec"]["nodeSelector"]["zone"] = "b"
    cluster.batch.create_namespaced_job(gang_namespace, high)
    cluster.wait_for(lambda: all_bound(cluster, gang_namespace, "high", 2), timeout=30,
                     message="the high Job bound on zone b")
    assert all_bound(cluster, gang_namespace, "lowest", 2)  # zone a: never a victim
    annotations = cluster.batch.read_namespaced_job("other", gang_namespace).metadata.annotations
    assert (annotations or {}).get(REQUEUES_ANNOTATION) == "1"


def test_a_running_gang_that_loses_a_member_to_the_scheduler_is_requeued_whole(
    cluster: Any, gang_namespace: str, plain_namespace: str, classes: dict[str, str]
) -> None:
    """kube-scheduler preempts one member for a high pod of no gang; the Job controller
    recreates it, gangkeeper releases it pinned to its old node, it cannot bind there,
    and after rebindSeconds the whole gang is requeued (suspended and resumed): not left
    running short. `backoffLimit: 1`: the preempted member counts as one failure."""
    pool = unique("short")
    nodes = cluster.create_gpu_nodes(pool, 4, 8, labels={POOL_LABEL: pool})
    cluster.batch.create_namespaced_job(
        gang_namespace, job("gang", pool, 4, 8, classes["low"], backoff_limit=1))
    cluster.wait_for(lambda: all_bound(cluster, gang_namespace, "gang", 4), timeout=60,
                     message="the 4-member gang bound")
    spec = gpu_template(pool, 8)["spec"]
    spec["priorityClassName"] = classes["high"]
    spec["nodeSelector"]["kubernetes.io/hostname"] = nodes[0]
    started = time.monotonic()
    cluster.core.create_namespaced_pod(plain_namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "urgent"}, "spec": spec})
    cluster.wait_for(
        lambda: is_bound(cluster.core.read_namespaced_pod("urgent", plain_namespace)),
        timeout=60, message="kube-scheduler preempting a member for the urgent pod")
    cluster.wait_for(
        lambda: (cluster.batch.read_namespaced_job("gang", gang_namespace).metadata
                 .annotations or {}).get(REQUEUES_ANNOTATION) == "1",
        timeout=5 + 30, message="the gang requeued whole")
    requeued_after = time.monotonic() - started
    assert not failed(cluster, gang_namespace, "gang")
    # Three nodes are left: the gang of four waits whole, gated, none bound.
    cluster.wait_for(
        lambda: (found := pods_of(cluster, gang_namespace, "gang")) and len(found) == 4
        and all(is_gated(p) for p in found),
        timeout=60, message="the resumed gang's 4 new members gated")
    assert requeued_after <= 5 + 10 + 10, requeued_after  # rebindSeconds + 10 s (+ binding)


@pytest.mark.parametrize("backend_namespace", ["native"], indirect=True)
def test_on_the_native_backend_kubernetes_preempts_whole_gangs_and_the_victims_jobs_fail(
    cluster: Any, backend_namespace: str, classes: dict[str, str]
) -> None:
    """Scenario 1 on the `native` backend, beside gangkeeper's own (the test above): the
    gang goes to kube-scheduler as a scheduling.k8s.io PodGroup and Kubernetes 1.37's
    workload-aware preemption acts. It too takes exactly two low gangs whole and binds the
    high one whole, but it deletes the victims' pods, so the Job controller counts them
    failed: with `backoffLimit: 0` both victim Jobs fail, where gangkeeper's requeue
    (suspend and resume) fails none and runs them again."""
    namespace = backend_namespace
    pool, lows = fill_with_low_jobs(cluster, namespace, classes, "native-preempt")
    with PartlyBound(cluster, namespace, lows) as watch:
        started = time.monotonic()
        cluster.batch.create_namespaced_job(
            namespace, job("high", pool, 2, 8, classes["high"], run_for="8s"))
        cluster.wait_for(lambda: all_bound(cluster, namespace, "high", 2), timeout=30,
                         message="the high Job bound whole")
        bound_after = time.monotonic() - started
        victims = cluster.wait_for(
            lambda: [n for n in lows if failed(cluster, namespace, n)] or None,
            timeout=30, message="the victims' Jobs counted failed")
    preempted = {e.involved_object.name.rsplit("-", 2)[0]
                 for e in events(cluster, namespace, "Preempted")}
    assert preempted == set(victims) and len(victims) == 2, (preempted, victims)
    assert watch.seen == [], f"partly bound: {watch.seen}"
    for name in set(lows) - set(victims):
        assert all_bound(cluster, namespace, name, 2), name
    assert bound_after <= 10.0, f"the high Job bound {bound_after:.1f}s after it was created"
