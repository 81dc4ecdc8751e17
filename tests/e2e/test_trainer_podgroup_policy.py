"""A runtime with Trainer's own `podGroupPolicy.coscheduling`: Trainer gangs the pods
itself, and gangkeeper must not gang them a second time.

Trainer v2.2.0's CoScheduling plugin (`pkg/runtime/framework/plugins/coscheduling/
coscheduling.go`) is always registered — no flag or config turns it on — and acts on
any runtime with `podGroupPolicy.coscheduling`: it labels the pods
`scheduling.x-k8s.io/pod-group: <TrainJob name>` and creates the PodGroup of that
name (minMember = the pods, minResources = their requests, owned by the TrainJob).
It needs the scheduler-plugins PodGroup CRD installed before it starts (else it logs
"PodGroup CRDs must be installed in advance" and watches no PodGroups; the API
scheme registers the type in `cmd/trainer-controller-manager/main.go`); the sandbox
installs the CRD before it starts any controller. It does not set a schedulerName:
the runtime names the scheduler, here the sandbox's `scheduler-plugins-scheduler`.

gangkeeper sees the pod-group label on the pods Trainer's JobSet creates and, under
`onConflict: skip` (the default), leaves them alone — no gate, no gang label, no
PodGroup of its own — while Coscheduling places them through Trainer's PodGroup;
under `onConflict: reject` it refuses the TrainJob at apply time (every pod of it
would be refused, so it could never run) and, for a TrainJob admitted before, the
pods, with a message naming the key, which the Job controller reports on the Job.
Either way one gang system keys the
pods, never two (the double-keying of kubeflow/trainer#4060, where two podGroupPolicy
plugins each key the same TrainJob, cannot happen across Trainer and gangkeeper).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders.cluster import POOL_LABEL, unique
from builders.controllers import (
    condition,
    is_bound,
    pods_of,
    recording,
    run_blocker,
    wait_for_pods,
)
from builders.trainer import (
    create_runtime,
    create_trainjob,
    namespaced_runtime,
    needs_trainer,
    pod_spec_of,
    read_trainjob,
    selector,
    trainjob,
)
from kubernetes.client.exceptions import ApiException

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SCHEDULER = "scheduler-plugins-scheduler"
GANG_LABEL = "gangkeeper.io/gang"


def needs_coscheduling(cluster: Any) -> None:
    needs_trainer(cluster)
    if cluster.sandbox is None or "scheduler-plugins" not in cluster.sandbox.state().get(
        "components", []
    ):
        pytest.skip("needs the sandbox's scheduler-plugins scheduler")


def trainer_ganged(cluster: Any, namespace: str, pool: str, nodes: int) -> dict[str, Any]:
    """A TrainJob on a copy of torch-distributed with `podGroupPolicy.coscheduling` and
    the Coscheduling scheduler, `nodes` nodes of 1 GPU; created with its runtime."""
    runtime = namespaced_runtime(cluster, "torch-distributed", unique("torch-cosched"), namespace)
    runtime["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 60}}
    pod_spec_of(runtime, "node")["schedulerName"] = SCHEDULER
    create_runtime(cluster, runtime)
    body = trainjob(unique("tg"), namespace, pool, runtime=runtime["metadata"]["name"],
                    runtime_kind="TrainingRuntime", nodes=nodes, gpus=1)
    create_trainjob(cluster, body)
    return body


def podgroups(cluster: Any, namespace: str) -> list[dict[str, Any]]:
    found = cluster.custom.list_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups"
    )
    return list(found["items"])


@pytest.mark.parametrize("backend_namespace", ["gate", "coscheduling"], indirect=True)
def test_trainer_keyed_pods_are_left_to_trainer_and_coscheduling_under_on_conflict_skip(
    cluster: Any, backend_namespace: str
) -> None:
    """On every backend; on `coscheduling` gangkeeper's own key would be the very same
    label with the very same value (its PodGroup is named after the TrainJob too)."""
    needs_coscheduling(cluster)
    gang_namespace = backend_namespace
    pool = unique("trainer-pg")
    cluster.create_gpu_nodes(pool, 2, 1, labels={POOL_LABEL: pool})
    with recording(cluster, gang_namespace) as seen:
        body = trainer_ganged(cluster, gang_namespace, pool, nodes=2)
        name = body["metadata"]["name"]
        found = wait_for_pods(cluster, gang_namespace, selector(name), 2, where=is_bound,
                              what="bound by Coscheduling")
        gated = seen.gated_at_creation()

    assert gated and not any(gated.values()), f"gangkeeper gated Trainer-keyed pods: {gated}"
    assert {p.metadata.labels.get(GROUP_LABEL) for p in found} == {name}
    assert not any(GANG_LABEL in p.metadata.labels for p in found), "gangkeeper keyed them too"
    assert {p.spec.scheduler_name for p in found} == {SCHEDULER}
    [group] = podgroups(cluster, gang_namespace)
    assert group["metadata"]["name"] == name
    assert [o["kind"] for o in group["metadata"]["ownerReferences"]] == ["TrainJob"]
    assert (group["spec"]["minMember"], group["spec"]["minResources"]) == (
        2, {"nvidia.com/gpu": "2"}
    )
    assert not any(k.startswith("gangkeeper.io/")
                   for k in group["metadata"].get("annotations") or {}), group["metadata"]
    cluster.wait_for(lambda: condition(read_trainjob(cluster, gang_namespace, name), "Complete"),
                     timeout=120, message=f"TrainJob {name} Complete")
    # The scheduler-plugins controller keeps the PodGroup's status, as on a real cluster.
    cluster.wait_for(
        lambda: (podgroups(cluster, gang_namespace)[0].get("status") or {}).get("phase")
        == "Finished",
        timeout=60,
        message=f"PodGroup {name} Finished (scheduler-plugins controller)",
    )
    assert podgroups(cluster, gang_namespace)[0]["status"]["succeeded"] == 2


def test_under_on_conflict_reject_a_trainer_ganged_trainjob_and_its_pods_are_refused(
    cluster: Any, gang_namespace: str, plain_namespace: str
) -> None:
    """The TrainJob is refused at apply time (every pod of it would be); pods of one
    admitted before the switch to `reject` are refused when the Job controller
    recreates them, and the Job's events name the key."""
    needs_coscheduling(cluster)
    pool = unique("trainer-pg")
    cluster.create_gpu_nodes(pool, 2, 1, labels={POOL_LABEL: pool})
    # Admitted under skip; with one of its 2 GPUs taken, Coscheduling places neither pod.
    run_blocker(cluster, plain_namespace, pool, 1)
    earlier = trainer_ganged(cluster, gang_namespace, pool, nodes=2)
    early = earlier["metadata"]["name"]
    wait_for_pods(cluster, gang_namespace, selector(early), 2, what="created (skip)")
    with cluster.gangkeeper_configured(onConflict="reject"):
        with pytest.raises(ApiException) as refused:
            trainer_ganged(cluster, gang_namespace, pool, nodes=2)
        cluster.core.delete_collection_namespaced_pod(
            gang_namespace, label_selector=selector(early), grace_period_seconds=0
        )

        def refusals() -> list[str]:
            events = cluster.core.list_namespaced_event(gang_namespace).items
            return [e.message for e in events
                    if e.reason == "FailedCreate" and e.involved_object.kind == "Job"]

        messages = cluster.wait_for(refusals, timeout=60,
                                    message="the Job controller reporting refused pods")
        assert pods_of(cluster, gang_namespace, selector(early)) == []
    body = str(refused.value.body)
    assert "podGroupPolicy.coscheduling (label scheduling.x-k8s.io/pod-group)" in body, body
    assert "onConflict: reject" in body, body
    assert any(f"{GROUP_LABEL}={early}" in m and "gangkeeper" in m for m in messages), messages
    # Trainer's PodGroup of the admitted TrainJob, and none for the refused one.
    assert [g["metadata"]["name"] for g in podgroups(cluster, gang_namespace)] == [early]
