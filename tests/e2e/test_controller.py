"""The gang controller on a real control plane: whole gangs bind together or not at all.

Every scenario of issue 5 that this sandbox can run:
1. the seed story, side by side with a namespace gangkeeper does not manage;
2. members arriving over time are released only once the last one exists;
3. the controller killed (SIGKILL) in the middle of a release: the next one finishes it
   (at each step of a release, deterministically: `test_controller_crashes.py`);
4. the native backend (scheduling.k8s.io PodGroup, feature gate GenericWorkload) end
   to end; coscheduling: the PodGroup before the lifted gates, then the sandbox's
   scheduler-plugins scheduler binds the gang (its seed story:
   `test_coscheduling_scheduler.py`);
5. a gang left incomplete gets Events (pods and owner) and shows in `gangkeeper status`.

The gangkeeper process of the sandbox runs the controller; scenario 5 adds a second
controller in this process (own Lease, 2-second timeout) so the test does not wait the
default 5 minutes. No API server mocks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, gang_pod, indexed_job, pod_spec, unique
from builders.events import events_in
from kubernetes import client, watch

from gangkeeper.policies.names import GATE
from gangkeeper.webhook.controller import GangController

GANG_LABEL = "gangkeeper.io/gang"


# -- helpers --------------------------------------------------------------------------------


def pods_of(cluster: Any, namespace: str, selector: str = "") -> list[Any]:
    return list(cluster.core.list_namespaced_pod(namespace, label_selector=selector).items)


def gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or [])


def bound(pods: list[Any]) -> list[Any]:
    return [p for p in pods if p.spec.node_name]


def scheduled_at(pod: Any) -> datetime:
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "True":
            return condition.last_transition_time  # type: ignore[no-any-return]
    raise AssertionError(f"pod {pod.metadata.name} has no PodScheduled=True condition")


def plain_gpu_pod(name: str, pool: str, gpus: int) -> dict[str, Any]:
    """A pod that is not a gang (it will never be gated)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": pod_spec(pool, gpus),
    }


def force_delete(cluster: Any, namespace: str, names: list[str]) -> None:
    # No kubelet confirms a graceful deletion here: delete at once.
    for name in names:
        cluster.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def gangkeeper_status(cluster: Any, namespace: str, output: str = "json") -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gangkeeper.webhook.cli",
            "status",
            "-n",
            namespace,
            "-o",
            output,
            "--kubeconfig",
            cluster.kubeconfig,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# -- 1. the seed story ---------------------------------------------------------------------


def test_eight_workers_on_five_free_gpus_wait_whole_and_start_together_unlike_without_gangkeeper(
    cluster: Any, gang_namespace: str, plain_namespace: str
) -> None:
    gang_pool, plain_pool = unique("seed-gk"), unique("seed-plain")
    for pool in (gang_pool, plain_pool):
        cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})  # 8 GPUs
        # 3 GPUs taken by a running pod that is not part of any gang.
        cluster.core.create_namespaced_pod(plain_namespace, plain_gpu_pod(f"busy-{pool}", pool, 3))
    cluster.wait_for(
        lambda: len(bound(pods_of(cluster, plain_namespace))) == 2,
        timeout=60,
        message="both 3-GPU pods bound",
    )

    job = indexed_job("train", gang_namespace, gang_pool, workers=8, gpus=1)
    cluster.batch.create_namespaced_job(gang_namespace, job)
    cluster.batch.create_namespaced_job(
        plain_namespace, indexed_job("train", plain_namespace, plain_pool, workers=8, gpus=1)
    )
    with_gk = "job-name=train"
    cluster.wait_for(
        lambda: len(pods_of(cluster, gang_namespace, with_gk)) == 8,
        timeout=60,
        message="8 workers created under gangkeeper",
    )
    cluster.wait_for(
        lambda: len(bound(pods_of(cluster, plain_namespace, with_gk))) == 5,
        timeout=60,
        message="5 workers bound without gangkeeper",
    )
    time.sleep(3.0)  # time for anything that would still bind to bind

    without = pods_of(cluster, plain_namespace, with_gk)
    assert (len(bound(without)), len(without) - len(bound(without))) == (5, 3), (
        "without gangkeeper the default scheduler binds 5 of 8 workers and strands 3"
    )
    workers = pods_of(cluster, gang_namespace, with_gk)
    assert bound(workers) == [], "with gangkeeper no worker may bind while only 5 GPUs are free"
    assert all(gated(p) for p in workers)

    [row] = json.loads(gangkeeper_status(cluster, gang_namespace))
    assert (row["present"], row["minMember"], row["gated"], row["bound"]) == (8, 8, 8, 0)
    assert row["reason"].startswith("needs 8 nvidia.com/gpu, 5 free on eligible nodes")

    # The 5 free GPUs stay usable: a 4-GPU job (one pod, not a gang) binds at once.
    small = indexed_job("small", gang_namespace, gang_pool, workers=1, gpus=4)
    cluster.batch.create_namespaced_job(gang_namespace, small)
    cluster.wait_for(
        lambda: bound(pods_of(cluster, gang_namespace, "job-name=small")),
        timeout=60,
        message="the 4-GPU job bound",
    )
    assert all(gated(p) for p in pods_of(cluster, gang_namespace, with_gk))

    # Free the 3-GPU and the 4-GPU pods: now 8 GPUs are free and the gang starts.
    cluster.batch.delete_namespaced_job("small", gang_namespace, propagation_policy="Orphan")
    force_delete(
        cluster,
        gang_namespace,
        [p.metadata.name for p in pods_of(cluster, gang_namespace, "job-name=small")],
    )
    force_delete(cluster, plain_namespace, [f"busy-{gang_pool}"])
    cluster.wait_for(
        lambda: len(bound(pods_of(cluster, gang_namespace, with_gk))) == 8,
        timeout=60,
        message="all 8 workers bound",
    )
    times = [scheduled_at(p) for p in pods_of(cluster, gang_namespace, with_gk)]
    spread = (max(times) - min(times)).total_seconds()
    assert spread <= 3.0, f"workers bound {spread:.0f}s apart; a gang starts together"


# -- 2. members arriving over time ----------------------------------------------------------


def test_a_jobs_workers_are_released_only_after_the_eighth_exists(
    cluster: Any, gang_namespace: str
) -> None:
    pool = unique("arrive-job")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})
    since = cluster.core.list_namespaced_pod(gang_namespace).metadata.resource_version
    cluster.batch.create_namespaced_job(
        gang_namespace, indexed_job("train", gang_namespace, pool, workers=8, gpus=1)
    )
    # Watch events come in the API server's commit order: every creation and the
    # first lifted gate can be ordered exactly.
    created: set[str] = set()
    first_release_after: int | None = None
    deadline = time.monotonic() + 90
    version = since
    while time.monotonic() < deadline and len(bound(pods_of(cluster, gang_namespace))) < 8:
        stream = watch.Watch()
        for event in stream.stream(
            cluster.core.list_namespaced_pod, gang_namespace, resource_version=version,
            timeout_seconds=10,
        ):
            pod = event["object"]
            version = pod.metadata.resource_version
            created.add(pod.metadata.name)
            if not gated(pod) and first_release_after is None:
                first_release_after = len(created)
            if first_release_after is not None:
                stream.stop()
        if first_release_after is not None:
            break
    assert first_release_after == 8, (
        f"first gate lifted when {first_release_after} of 8 workers existed; status:\n"
        + gangkeeper_status(cluster, gang_namespace, "text")
    )
    cluster.wait_for(lambda: len(bound(pods_of(cluster, gang_namespace))) == 8, timeout=60,
                     message="the 8 workers bound")


def test_members_created_one_by_one_stay_gated_until_the_last_arrives(
    cluster: Any, gang_namespace: str
) -> None:
    pool = unique("arrive-pods")
    cluster.create_gpu_nodes(pool, 1, 4, labels={POOL_LABEL: pool})
    for i in range(4):
        cluster.core.create_namespaced_pod(
            gang_namespace, gang_pod(f"w{i}", pool, gang="slow", min_member=4)
        )
        if i < 3:
            time.sleep(1.5)  # the controller has every chance to act early
            pods = pods_of(cluster, gang_namespace)
            assert len(pods) == i + 1
            assert all(gated(p) for p in pods), f"released with {i + 1} of 4 members"
    cluster.wait_for(
        lambda: len(bound(pods_of(cluster, gang_namespace))) == 4,
        timeout=30,
        message="the 4 members bound once the 4th existed",
    )


# -- 3. kill the controller in the middle of a release ---------------------------------------


def test_a_release_cut_short_by_sigkill_is_finished_after_restart(
    cluster: Any, gang_namespace: str
) -> None:
    if cluster.sandbox is None:
        pytest.skip("killing gangkeeper needs the sandbox (it runs gangkeeper as a process)")
    size, pool = 120, unique("kill")
    # Nodes that exist (so admission accepts the gang) but are cordoned by taint:
    # the gang cannot start until they are uncordoned.
    cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    nodes = cluster.create_gpu_nodes(pool, 4, 30, labels={POOL_LABEL: pool}, taints=[cordon])
    for i in range(size):
        cluster.core.create_namespaced_pod(
            gang_namespace, gang_pod(f"w{i:03d}", pool, gang="big", min_member=size)
        )
    cluster.wait_for(lambda: len(pods_of(cluster, gang_namespace)) == size, timeout=60)
    time.sleep(2.0)
    assert all(gated(p) for p in pods_of(cluster, gang_namespace))  # nowhere to go yet

    since = cluster.core.list_namespaced_pod(gang_namespace).metadata.resource_version
    for name in nodes:  # 120 GPUs become usable: the whole gang fits
        cluster.core.patch_node(name, {"spec": {"taints": None}})
    stream = watch.Watch()
    for event in stream.stream(
        cluster.core.list_namespaced_pod, gang_namespace, resource_version=since, timeout_seconds=60
    ):
        if not gated(event["object"]):
            cluster.gangkeeper_stop(kill=True)  # SIGKILL mid-burst: nothing cleaned up
            stream.stop()
    left = sum(1 for p in pods_of(cluster, gang_namespace) if gated(p))
    print(f"after SIGKILL {left} of {size} members were still gated")

    cluster.gangkeeper_start()
    # The dead leader's Lease must expire first (15 s), then the new leader finishes.
    cluster.wait_for(
        lambda: not any(gated(p) for p in pods_of(cluster, gang_namespace)),
        timeout=90,
        message="every gate lifted by the next leader",
    )
    cluster.wait_for(
        lambda: len(bound(pods_of(cluster, gang_namespace))) == size,
        timeout=90,
        message=f"all {size} members bound",
    )


# -- 4. native backend -------------------------------------------------------------------------


def _native_version(cluster: Any) -> str | None:
    done = cluster.kubectl(
        "api-resources", "--api-group=scheduling.k8s.io", "-o", "name", check=False
    )
    if "podgroups.scheduling.k8s.io" not in done.stdout:
        return None
    versions = cluster.kubectl("api-versions").stdout.split()
    for version in ("v1beta1", "v1alpha3", "v1alpha2", "v1alpha1"):
        if f"scheduling.k8s.io/{version}" in versions:
            return version
    return None


def test_native_backend_gets_a_scheduling_k8s_io_podgroup_owned_by_the_workload(
    cluster: Any, plain_namespace: str
) -> None:
    version = _native_version(cluster)
    if version is None:
        pytest.skip("scheduling.k8s.io PodGroup not served (feature gate GenericWorkload off)")
    pool = unique("native")
    cluster.create_gpu_nodes(pool, 2, 2, labels={POOL_LABEL: pool})
    owner = cluster.core.create_namespaced_config_map(
        plain_namespace, {"metadata": {"name": "trainer"}}
    )
    owner_ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "trainer",
        "uid": owner.metadata.uid,
    }
    # Pods as the mutation writes them for the native backend (made by hand here,
    # in a namespace the webhook leaves alone, so the sandbox keeps its gate backend).
    for i in range(4):
        pod = gang_pod(f"w{i}", pool)
        pod["metadata"]["labels"] = {GANG_LABEL: "nat", "gangkeeper.io/role": "worker"}
        pod["metadata"]["annotations"] = {
            "gangkeeper.io/gang-name": "nat",
            "gangkeeper.io/min-member": "4",
            "gangkeeper.io/backend": "native",
            "gangkeeper.io/owner": json.dumps(owner_ref),
        }
        pod["spec"]["schedulingGroup"] = {"podGroupName": "nat"}
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
        cluster.core.create_namespaced_pod(plain_namespace, pod)

    def group() -> dict[str, Any] | None:
        try:
            return cluster.custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
                "scheduling.k8s.io", version, plain_namespace, "podgroups", "nat"
            )
        except client.ApiException as err:
            if err.status == 404:
                return None
            raise

    created = cluster.wait_for(group, timeout=30, message="native PodGroup created")
    assert created["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    [ref] = created["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"]) == ("ConfigMap", "trainer", owner.metadata.uid)
    cluster.wait_for(
        lambda: len(bound(pods_of(cluster, plain_namespace))) == 4,
        timeout=60,
        message="the 4 native gang members bound",
    )
    # Owner-referenced: the garbage collector deletes the group with its owner. The
    # podgroup-protection finalizer keeps it until no live pod references it.
    cluster.core.delete_namespaced_config_map("trainer", plain_namespace)

    def deleting() -> bool:
        found = group()
        return found is None or bool(found["metadata"].get("deletionTimestamp"))

    cluster.wait_for(deleting, timeout=90, message="PodGroup deleted by the garbage collector")
    # The sandbox runs no podgroup-protection controller to drop the finalizer once
    # the pods are gone; drop it here so the namespace can go.
    cluster.custom.patch_namespaced_custom_object(
        "scheduling.k8s.io",
        version,
        plain_namespace,
        "podgroups",
        "nat",
        {"metadata": {"finalizers": None}},
    )


def test_coscheduling_backend_gets_its_podgroup_before_the_gates_are_lifted(
    cluster: Any, plain_namespace: str
) -> None:
    # What gangkeeper owes the Coscheduling scheduler: the PodGroup, then the lifted
    # gates; the sandbox's scheduler-plugins scheduler then binds the whole gang.
    done = cluster.kubectl("api-resources", "--api-group=scheduling.x-k8s.io", "-o", "name",
                           check=False)
    if "podgroups.scheduling.x-k8s.io" not in done.stdout:
        pytest.skip("the scheduling.x-k8s.io PodGroup CRD is not installed")
    pool = unique("cosched")
    cluster.create_gpu_nodes(pool, 1, 4, labels={POOL_LABEL: pool})
    owner = cluster.core.create_namespaced_config_map(
        plain_namespace, {"metadata": {"name": "trainer"}}
    )
    owner_ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "trainer",
                 "uid": owner.metadata.uid}
    for i in range(3):  # as the mutation writes them for the coscheduling backend
        pod = gang_pod(f"w{i}", pool)
        pod["metadata"]["labels"] = {GANG_LABEL: "cos", "gangkeeper.io/role": "worker",
                                     "scheduling.x-k8s.io/pod-group": "cos"}
        pod["metadata"]["annotations"] = {
            "gangkeeper.io/gang-name": "cos", "gangkeeper.io/min-member": "3",
            "gangkeeper.io/backend": "coscheduling", "gangkeeper.io/owner": json.dumps(owner_ref),
        }
        pod["spec"]["schedulerName"] = "scheduler-plugins-scheduler"
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
        cluster.core.create_namespaced_pod(plain_namespace, pod)
    cluster.wait_for(lambda: not any(gated(p) for p in pods_of(cluster, plain_namespace)),
                     timeout=30, message="gates lifted")
    # Created before the first gate was lifted, so it is there now.
    group = cluster.custom.get_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", plain_namespace, "podgroups", "cos"
    )
    assert group["spec"] == {"minMember": 3, "minResources": {"nvidia.com/gpu": "3"}}
    [ref] = group["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["uid"]) == ("ConfigMap", owner.metadata.uid)
    if cluster.sandbox is not None and "scheduler-plugins" in cluster.sandbox.state().get(
        "components", []
    ):
        cluster.wait_for(lambda: len(bound(pods_of(cluster, plain_namespace))) == 3,
                         timeout=60, message="Coscheduling bound the 3 members")


# -- 5. a gang left incomplete ----------------------------------------------------------------


def test_an_incomplete_gang_gets_events_on_pods_and_owner_and_shows_in_status(
    cluster: Any, gang_namespace: str, own_controller: GangController
) -> None:
    pool = unique("stuck")
    cluster.create_gpu_nodes(pool, 1, 8, labels={POOL_LABEL: pool})
    # The workload owns its pods; only 3 of its 8 workers are ever created.
    owner = cluster.core.create_namespaced_config_map(
        gang_namespace, {"metadata": {"name": "trainer"}}
    )
    for i in range(3):
        pod = gang_pod(f"w{i}", pool, gang="stuck", min_member=8)
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "name": "trainer",
                "uid": owner.metadata.uid,
                "controller": True,
            }
        ]
        cluster.core.create_namespaced_pod(gang_namespace, pod)

    def events() -> list[dict[str, Any]]:
        return events_in(cluster.api_client, gang_namespace, "GangIncomplete")

    cluster.wait_for(
        lambda: len({e["regarding"]["name"] for e in events()}) >= 4,
        timeout=30,
        message="GangIncomplete events on the 3 pods and their owner",
    )
    notes = {(e["regarding"]["kind"], e["regarding"]["name"]): e["note"] for e in events()}
    assert set(notes) == {("ConfigMap", "trainer"), ("Pod", "w0"), ("Pod", "w1"), ("Pod", "w2")}
    assert "3 of 8 members exist" in notes[("ConfigMap", "trainer")]
    owner_events = [e for e in events() if e["regarding"]["kind"] == "ConfigMap"]
    assert {e["regarding"]["uid"] for e in owner_events} == {owner.metadata.uid}
    assert all(e["type"] == "Warning" for e in events())

    [row] = json.loads(gangkeeper_status(cluster, gang_namespace))
    assert (row["present"], row["minMember"], row["gated"], row["bound"]) == (3, 8, 3, 0)
    assert (row["state"], row["code"], row["reason"]) == (
        "waiting",
        "incomplete",
        "3 of 8 members exist",
    )
    text = gangkeeper_status(cluster, gang_namespace, "text")
    assert "3/8" in text.splitlines()[1]
    samples = own_controller.metric_samples()
    assert samples[("gangkeeper_gangs_waiting", (("reason", "incomplete"),))] >= 1
    assert samples[("gangkeeper_gangs_stuck", ())] >= 1
