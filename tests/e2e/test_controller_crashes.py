"""The controller SIGKILLed at each step of a release: the next leader finishes every
gang (extends test_controller.py's SIGKILL mid-release of 120 pods).

Each case makes a second `gangkeeper serve` the leader with
`GANGKEEPER_FAULT=kill:STEP` (`webhook/controller/faults.py`: the controller sends
itself SIGKILL exactly at STEP — no race between a signal and a burst):
- `before-group`: the release is planned, its PodGroup not created yet;
- `mid-burst`: 10 of 40 gates lifted (a few more may be in flight);
- `after-burst`: every gate lifted, nothing logged or counted yet.
The gangs are of the coscheduling backend (as the mutation writes them, in a
namespace the webhook leaves alone), so a release has all three steps: the PodGroup,
then the gates. The sandbox's own gangkeeper takes the Lease over and must leave
every gang with its PodGroup and no gate, each gate lifted once.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, gang_pod, unique
from builders.faults import (
    LEASE_SECONDS,
    count_gated,
    identity_of,
    leading_replica,
    lease_holder,
    metrics,
    settled_gated,
    settled_metrics,
    wait_dead,
)
from kubernetes import client

from gangkeeper.policies.names import GATE

GANG_LABEL = "gangkeeper.io/gang"
UNGATED = "gangkeeper_gang_ungated_pods_total"
SIZE = 40


def coscheduling_gang(cluster: Any, namespace: str, pool: str, name: str) -> None:
    owner = cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": owner.metadata.uid}
    for i in range(SIZE):
        pod = gang_pod(f"{name}-{i:02d}", pool)
        pod["metadata"]["labels"] = {GANG_LABEL: name, "gangkeeper.io/role": "worker",
                                     "scheduling.x-k8s.io/pod-group": name}
        pod["metadata"]["annotations"] = {
            "gangkeeper.io/gang-name": name, "gangkeeper.io/min-member": str(SIZE),
            "gangkeeper.io/backend": "coscheduling", "gangkeeper.io/owner": json.dumps(ref),
        }
        pod["spec"]["schedulerName"] = "scheduler-plugins-scheduler"
        pod["spec"]["schedulingGates"] = [{"name": GATE}]
        cluster.core.create_namespaced_pod(namespace, pod)


def podgroup(cluster: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return cluster.custom.get_namespaced_custom_object(  # type: ignore[no-any-return]
            "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", name
        )
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


@pytest.mark.parametrize("step", ["before-group", "mid-burst", "after-burst"])
def test_a_leader_killed_at_each_step_of_a_release_is_finished_by_the_next(
    cluster: Any, plain_namespace: str, step: str
) -> None:
    if cluster.sandbox is None:
        pytest.skip("killing gangkeeper at a step needs the sandbox's processes")
    done = cluster.kubectl("api-resources", "--api-group=scheduling.x-k8s.io", "-o", "name",
                           check=False)
    if "podgroups.scheduling.x-k8s.io" not in done.stdout:
        pytest.skip("the scheduling.x-k8s.io PodGroup CRD is not installed")
    pool = unique("crash")
    cluster.create_gpu_nodes(pool, 2, SIZE, labels={POOL_LABEL: pool})  # room for both
    fault = f"kill:{step}:10" if step == "mid-burst" else f"kill:{step}"
    url = cluster.sandbox.controller_url  # the controller's /metrics
    with leading_replica(cluster, "gangkeeper-crash", {"GANGKEEPER_FAULT": fault}) as (
        faults, _
    ):
        before = metrics(cluster, url).get(UNGATED, 0.0)
        coscheduling_gang(cluster, plain_namespace, pool, "first")  # released at the 40th
        wait_dead(faults, "gangkeeper-crash")
        left = settled_gated(cluster, plain_namespace)
        group = podgroup(cluster, plain_namespace, "first")
        print(f"killed at {step}: {left} of {SIZE} gated, PodGroup "
              f"{'exists' if group else 'missing'}")
        if step == "before-group":
            assert (left, group) == (SIZE, None)
        elif step == "mid-burst":
            assert group is not None and 0 < left < SIZE
        else:
            assert group is not None and left == 0
        # A gang that arrives while no one leads is not missed either.
        coscheduling_gang(cluster, plain_namespace, pool, "second")
        cluster.wait_for(lambda: count_gated(cluster, plain_namespace) == 0,
                         timeout=LEASE_SECONDS + 60, message="the next leader lifts every gate")
        assert lease_holder(cluster) == identity_of(faults, cluster.sandbox.controller_process)
        for name in ("first", "second"):
            found = podgroup(cluster, plain_namespace, name)
            assert found is not None and found["spec"]["minMember"] == SIZE
        # The last gate is seen lifted a moment before the new leader counts its burst.
        after = settled_metrics(cluster, url, (UNGATED,)).get(UNGATED, 0.0)
    assert after - before == left + SIZE, "each remaining gate lifted exactly once"
    if "scheduler-plugins" in cluster.sandbox.state().get("components", []):
        cluster.wait_for(
            lambda: sum(1 for p in cluster.core.list_namespaced_pod(plain_namespace).items
                        if p.spec.node_name) == 2 * SIZE,
            timeout=120, message="Coscheduling binds both gangs",
        )
