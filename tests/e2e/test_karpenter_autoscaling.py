"""Gangs on autoscaled pools, against a real Karpenter (its kwok provider, v1.15.0).

A sandbox of its own (module scope): the control plane, kwok, Karpenter and
gangkeeper with declared pools, and no GPU node at the start. Each test applies its
own NodePool (8-GPU instance types from the sandbox's instance-types file) selecting
its own pool label, so Karpenter's nodes for one test never serve another.

    pool a: NodePool limit 64 GPUs, declared maxCount 8 (the two agree)
    pool b: NodePool limit 64 GPUs, declared maxCount 16 (the declared limit is wrong)
    pool c: NodePool limit 48 GPUs, declared maxCount 6 (holds one 4 x 8 gang at a time)
    pools e, f, q, r: like a, one test each

Karpenter only acts on pods the scheduler marked Unschedulable; gated gang members are
SchedulingGated, so without placeholders (namespace `e2e-autoscaling-off`, the
demonstration in docs/autoscaling.md) no node ever comes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from builders.cluster import POOL_LABEL, indexed_job, unique
from builders.controllers import RUN_FOR, pinned_node
from conftest import Cluster, own_sandbox

from gangkeeper.policies.names import GATE, PLACEHOLDER_LABEL
from gangkeeper.webhook.sandbox.karpenter import KARPENTER, NODE_CLASS

pytestmark = pytest.mark.e2e

OFF_NAMESPACE = "e2e-autoscaling-off"
TIMEOUT = 45
#: Seconds for a gang's placeholders to be deleted and gone (kwok finishes the deletion of
#: a bound one) on a machine that also runs the session's sandbox beside this one.
PLACEHOLDERS_GONE = 60
POOLS = {
    "a": (8, 64), "b": (16, 64), "c": (6, 48), "e": (8, 64), "f": (8, 64), "q": (8, 64),
    "r": (8, 64), "cb": (8, 64),
}
CONFIG = {
    "pools": [
        {"name": p, "maxCount": count, "labels": {POOL_LABEL: p},
         "allocatable": {"nvidia.com/gpu": 8}}
        for p, (count, _) in POOLS.items()
    ],
    "provisioningTimeoutSeconds": TIMEOUT,
    "provisioningRetrySeconds": 30,
    "namespaceAutoscaling": {OFF_NAMESPACE: "off"},
}


def node_pool(pool: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": f"e2e-{pool}"},
        "spec": {
            "limits": {"nvidia.com/gpu": str(gpus)},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "20s"},
            "template": {
                "metadata": {"labels": {POOL_LABEL: pool}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": NODE_CLASS,
                    },
                    "expireAfter": "Never",
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In",
                         "values": ["on-demand"]},
                    ],
                },
            },
        },
    }


@pytest.fixture(scope="module")
def autoscaled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A sandbox with Karpenter and gangkeeper (declared pools), no GPU node."""
    directory = tmp_path_factory.mktemp("autoscaled")
    config = directory / "gangkeeper.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    # CapacityBuffer on: only the test that applies a CapacityBuffer is affected.
    with own_sandbox(directory, ("kwok", KARPENTER), config=config,
                     karpenter_feature_gates="CapacityBuffer=true") as cluster:
        pools = [node_pool(p, gpus) for p, (_, gpus) in POOLS.items()]
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(pools))
        yield cluster


@pytest.fixture
def namespace(autoscaled: Cluster) -> Iterator[str]:
    name = autoscaled.new_namespace(opted_in=True)
    yield name
    autoscaled.delete_namespace(name)


def job(name: str, namespace: str, pool: str, workers: int, run_for: str | None = None) -> Any:
    body = indexed_job(name, namespace, pool, workers=workers, gpus=8)
    if run_for:
        body["spec"]["template"]["metadata"] = {"annotations": {RUN_FOR: run_for}}
    return body


def members(cluster: Cluster, namespace: str, name: str) -> list[Any]:
    return cluster.core.list_namespaced_pod(
        namespace, label_selector=f"job-name={name}"
    ).items


def placeholders(cluster: Cluster, namespace: str | None = None) -> list[Any]:
    selector = PLACEHOLDER_LABEL
    if namespace is None:
        return cluster.core.list_pod_for_all_namespaces(label_selector=selector).items
    return cluster.core.list_namespaced_pod(namespace, label_selector=selector).items


def live_members(cluster: Cluster, namespace: str, name: str) -> list[Any]:
    pods = members(cluster, namespace, name)
    return [p for p in pods if p.status.phase not in ("Succeeded", "Failed")]


def all_bound(cluster: Cluster, namespace: str, name: str, count: int) -> bool:
    pods = live_members(cluster, namespace, name)
    return len(pods) == count and all(p.spec.node_name for p in pods)


def gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or [])


def pool_nodes(cluster: Cluster, pool: str) -> list[Any]:
    return cluster.core.list_node(label_selector=f"{POOL_LABEL}={pool}").items


def events(cluster: Cluster, namespace: str, reason: str) -> list[Any]:
    """events.k8s.io/v1 Events as dicts (what the controller writes: `note`, `regarding`);
    kubectl, because the Python client cannot read core Events without an eventTime."""
    done = cluster.kubectl("get", "events.events.k8s.io", "-n", namespace, "-o", "json")
    return [e for e in json.loads(done.stdout)["items"] if e.get("reason") == reason]


def create_job(cluster: Cluster, body: Any) -> None:
    cluster.batch.create_namespaced_job(body["metadata"]["namespace"], body)


def test_a_gang_on_a_pool_at_zero_gets_its_nodes_from_karpenter_and_binds_whole(
    autoscaled: Cluster, namespace: str, record_property: Any
) -> None:
    cluster = autoscaled
    name = unique("llama")
    started = time.monotonic()
    create_job(cluster, job(name, namespace, "a", 4))
    found = cluster.wait_for(
        lambda: len(placeholders(cluster, namespace)) == 4 and placeholders(cluster, namespace),
        timeout=30, message="four placeholders",
    )
    spec = found[0]
    assert spec.metadata.labels["gangkeeper.io/skip"] == "true"
    assert spec.metadata.annotations["karpenter.sh/do-not-disrupt"] == "true"
    assert spec.spec.priority_class_name == "gangkeeper-placeholder" and spec.spec.priority == -5
    [owner] = spec.metadata.owner_references
    assert (owner.kind, owner.name, owner.controller) == ("Job", name, False)
    assert spec.spec.node_selector == {POOL_LABEL: "a"}
    assert not spec.spec.scheduling_gates
    # Meanwhile every member stays gated and unbound: the gang goes whole or not at all.
    assert all(gated(p) and not p.spec.node_name for p in members(cluster, namespace, name))
    cluster.wait_for(lambda: all_bound(cluster, namespace, name, 4), timeout=120,
                     message="the gang bound on Karpenter's nodes")
    elapsed = time.monotonic() - started
    record_property("gang_creation_to_all_bound_seconds", round(elapsed, 1))
    print(f"\n4 x 8-GPU gang: creation -> all bound in {elapsed:.1f}s")
    bound = members(cluster, namespace, name)
    nodes = {p.spec.node_name for p in bound}
    karpenter_nodes = {n.metadata.name: n for n in pool_nodes(cluster, "a")}
    assert nodes <= set(karpenter_nodes) and len(karpenter_nodes) == 4  # no node wasted
    # Released pinned (placement): each member's pin names its Node itself (on
    # Karpenter's kwok nodes the hostname label is the NodeClaim's name, not the Node's).
    for p in bound:
        assert pinned_node(p) == p.spec.node_name
    cluster.wait_for(lambda: not placeholders(cluster, namespace), timeout=PLACEHOLDERS_GONE,
                     message="placeholders gone")


def test_without_placeholders_the_same_gang_never_gets_a_node(autoscaled: Cluster) -> None:
    cluster = autoscaled
    namespace = cluster.new_namespace(opted_in=True, name=OFF_NAMESPACE)
    try:
        name = unique("llama-off")
        create_job(cluster, job(name, namespace, "e", 4))
        cluster.wait_for(lambda: len(members(cluster, namespace, name)) == 4, timeout=30,
                         message="members created")
        time.sleep(25)  # Karpenter's batch window is 1-10 s; nodes came in ~10 s above
        assert pool_nodes(cluster, "e") == []
        assert placeholders(cluster, namespace) == []
        assert all(gated(p) for p in members(cluster, namespace, name))
        status = cluster.kubectl("get", "nodeclaims", "-o", "name").stdout
        assert "e2e-e-" not in status
    finally:
        cluster.delete_namespace(namespace)


def test_a_gang_beyond_the_declared_pool_is_refused_at_admission(
    autoscaled: Cluster, namespace: str
) -> None:
    # 72 GPUs; pool r holds 8 x 8. Its own pool, so that no other test's nodes are there:
    # nodes Karpenter makes carry the pool's label and count toward its maxCount
    # (tests/unit/cluster/test_declared_pools.py), so the bound holds with nodes too.
    body = job(unique("huge"), namespace, "r", 9)
    done = autoscaled.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(body), check=False
    )
    assert done.returncode != 0
    assert "72" in done.stderr and "64" in done.stderr, done.stderr


def test_beyond_an_undeclared_limit_the_ask_times_out_cleans_up_and_says_why(
    autoscaled: Cluster, namespace: str
) -> None:
    cluster = autoscaled
    name = unique("toolarge")
    create_job(cluster, job(name, namespace, "b", 10))  # 80 GPUs; NodePool b stops at 64
    cluster.wait_for(lambda: len(placeholders(cluster, namespace)) == 10, timeout=30,
                     message="ten placeholders")
    [event] = cluster.wait_for(
        lambda: events(cluster, namespace, "GangProvisioningTimedOut")[:1],
        timeout=TIMEOUT + 60, message="the timeout Event",
    )
    assert f"8 of 10 members' nodes came in {TIMEOUT} s" in event["note"], event["note"]
    cluster.wait_for(lambda: not placeholders(cluster, namespace), timeout=PLACEHOLDERS_GONE,
                     message="placeholders removed")
    pods = members(cluster, namespace, name)
    assert len(pods) == 10 and all(gated(p) and not p.spec.node_name for p in pods)
    report = cluster.kubectl("get", "events", "-n", namespace, "-o", "yaml").stdout
    assert "GangProvisioningTimedOut" in report


def test_two_gangs_racing_for_a_pool_that_holds_one_run_one_after_the_other(
    autoscaled: Cluster, namespace: str
) -> None:
    cluster = autoscaled
    first, second = unique("first"), unique("second")
    create_job(cluster, job(first, namespace, "c", 4, run_for="20s"))
    time.sleep(1)
    create_job(cluster, job(second, namespace, "c", 4, run_for="5s"))
    cluster.wait_for(lambda: all_bound(cluster, namespace, first, 4), timeout=120,
                     message="the first gang bound")
    # The second waits whole: never partly placed, while the first runs.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        pods = members(cluster, namespace, second)
        assert not any(p.spec.node_name for p in pods), "second gang partly placed"
        time.sleep(1)
    cluster.wait_for(lambda: all_bound(cluster, namespace, second, 4), timeout=120,
                     message="the second gang bound after the first finished")
    assert len(pool_nodes(cluster, "c")) <= 6


def test_the_controller_killed_while_placeholders_exist_leaks_nothing_and_the_gang_starts(
    autoscaled: Cluster, namespace: str
) -> None:
    cluster = autoscaled
    name = unique("crash")
    create_job(cluster, job(name, namespace, "f", 4))
    cluster.wait_for(lambda: len(placeholders(cluster, namespace)) == 4, timeout=30,
                     message="four placeholders")
    cluster.gangkeeper_stop(kill=True)
    try:
        cluster.wait_for(
            lambda: all(p.spec.node_name for p in placeholders(cluster, namespace)),
            timeout=120, message="Karpenter's nodes for the placeholders (gangkeeper down)",
        )
    finally:
        cluster.gangkeeper_start()
    cluster.wait_for(lambda: all_bound(cluster, namespace, name, 4), timeout=60,
                     message="the gang bound after the restart")
    cluster.wait_for(lambda: not placeholders(cluster, namespace), timeout=PLACEHOLDERS_GONE,
                     message="the adopted placeholders deleted")
    # A gang deleted while gangkeeper is down: its placeholders go with its Job
    # (ownerReference), through the garbage collector.
    other = unique("orphan")
    create_job(cluster, job(other, namespace, "f", 2))
    cluster.wait_for(lambda: len(placeholders(cluster, namespace)) == 2, timeout=30,
                     message="two placeholders")
    cluster.gangkeeper_stop(kill=True)
    try:
        cluster.batch.delete_namespaced_job(other, namespace, propagation_policy="Background")
        cluster.wait_for(lambda: not placeholders(cluster, namespace), timeout=60,
                         message="placeholders garbage-collected with their Job")
    finally:
        cluster.gangkeeper_start()


def test_under_a_quota_that_cannot_hold_members_and_placeholders_the_user_is_told(
    autoscaled: Cluster, namespace: str
) -> None:
    cluster = autoscaled
    quota = {"metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "32"}}}
    cluster.core.create_namespaced_resource_quota(namespace, quota)
    cluster.wait_for(
        lambda: cluster.core.read_namespaced_resource_quota("gpus", namespace).status.hard,
        timeout=30, message="the quota's status",
    )
    name = unique("quota")
    create_job(cluster, job(name, namespace, "q", 4))  # 32 GPUs: the members use it all
    [event] = cluster.wait_for(
        lambda: events(cluster, namespace, "GangPlaceholdersRefused")[:1],
        timeout=60, message="the refused-placeholders Event",
    )
    assert "exceeded quota" in event["note"], event["note"]
    assert placeholders(cluster, namespace) == []
    assert all(gated(p) for p in members(cluster, namespace, name))
    assert pool_nodes(cluster, "q") == []


def test_karpenters_capacity_buffer_provisions_for_a_gangs_shape_without_pods(
    autoscaled: Cluster, namespace: str
) -> None:
    """The CapacityBuffer API (autoscaling.x-k8s.io/v1beta1, Karpenter's `CapacityBuffer`
    gate): a buffer of 4 chunks shaped like an 8-GPU member gets 4 nodes from Karpenter
    with no pod at all. Not an `autoscaling:` mode of gangkeeper yet (see docs/autoscaling.md)."""
    cluster = autoscaled
    template = {
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": "member", "namespace": namespace},
        "template": {"spec": indexed_job("x", namespace, "cb", workers=1, gpus=8)["spec"][
            "template"]["spec"]},
    }
    buffer = {
        "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": "gang", "namespace": namespace},
        "spec": {"podTemplateRef": {"name": "member"}, "replicas": 4},
    }
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([template, buffer]))
    try:
        cluster.wait_for(lambda: len(pool_nodes(cluster, "cb")) == 4, timeout=90,
                         message="Karpenter's nodes for the CapacityBuffer")
    finally:
        cluster.kubectl("delete", "capacitybuffer", "gang", "-n", namespace)


def test_nothing_is_left_behind(autoscaled: Cluster) -> None:
    autoscaled.wait_for(lambda: not placeholders(autoscaled), timeout=60,
                        message="no placeholder in any namespace")
