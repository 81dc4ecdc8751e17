"""Steps that start later (issue 11): members a workload's controller creates only
after the first ones run are `later` roles — counted for feasibility, never waited for
before release (recognizers/jobset.py, trainjob.py, leaderworkerset.py).

Upstream shapes:
- kubernetes-sigs/jobset v0.11.1 `api/jobset/v1alpha2/jobset_types.go` (dependsOn
  with status Ready or Complete; startupPolicy.startupPolicyOrder InOrder) and
  `pkg/webhooks/pod_admission_webhook.go` (exclusive placement: a pod whose
  batch.kubernetes.io/job-completion-index is not "0" is refused until the index-0
  leader of its Job is scheduled; `pkg/util/placement/placement.go` IsLeaderPod);
- kubeflow/trainer HEAD `manifests/base/runtimes/deepspeed_distributed.yaml` (the
  launcher dependsOn node Ready; v2.2.0's copy has no dependsOn);
- kubernetes-sigs/lws v0.7.0 `api/leaderworkerset/v1/leaderworkerset_types.go`
  (startupPolicy LeaderReady: the workers' StatefulSet after the leader is Ready).
"""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import (
    GPU,
    Lookup,
    container,
    jobset,
    jobset_pod,
    leader_worker_set,
    no_lookup,
    pod_spec,
    replicated_job,
    template,
    training_runtime,
    trainjob,
)

from gangkeeper.policies.admission.decision import decide_pod, validate_object
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.model import Gang
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
INDEX = "batch.kubernetes.io/job-completion-index"


def roles(gang: Gang) -> list[tuple[str, int, bool]]:
    return [(r.name, r.count, r.later) for r in gang.roles]


def test_a_step_that_waits_for_another_to_be_ready_arrives_later() -> None:
    obj = jobset(
        "js",
        replicated_job("driver", 1, 1, 1),
        replicated_job("workers", 2, 2, 4, depends_on=[("driver", "Ready")]),
    )
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert roles(gang) == [("driver", 1, False), ("workers", 4, True)]
    assert (gang.min_member, gang.later_members, gang.needed_before_release) == (5, 4, 1)
    assert gang.total_demand() == {GPU: 17}  # the later members count for feasibility


def test_a_step_that_waits_for_another_to_complete_is_still_its_own_gang() -> None:
    obj = jobset(
        "js",
        replicated_job("init", 1, 1, None),
        replicated_job("workers", 1, 4, 1, depends_on=[("init", "Complete")]),
    )
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert roles(gang) == [("workers", 4, False)]


def test_in_order_startup_makes_every_replicated_job_after_the_first_later() -> None:
    obj = jobset("js", replicated_job("a", 1, 2), replicated_job("b", 1, 2),
                 replicated_job("c", 1, 2))
    obj["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert roles(gang) == [("a", 2, False), ("b", 2, True), ("c", 2, True)]


@pytest.mark.parametrize("where", ["jobset", "replicated-job"])
def test_exclusive_placement_followers_arrive_after_their_leader(where: str) -> None:
    obj = jobset("js", replicated_job("workers", 2, 4, 8))
    if where == "jobset":
        obj["metadata"]["annotations"] = {EXCLUSIVE: "cloud.google.com/gke-nodepool"}
    else:
        obj["spec"]["replicatedJobs"][0]["template"]["metadata"] = {
            "annotations": {EXCLUSIVE: "cloud.google.com/gke-nodepool"}
        }
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert roles(gang) == [("workers", 2, False), ("workers-followers", 6, True)]
    assert gang.needed_before_release == 2  # the index-0 leader of each Job


def test_the_node_selector_strategy_needs_no_leader_first() -> None:
    obj = jobset("js", replicated_job("workers", 2, 4, 8))
    obj["metadata"]["annotations"] = {
        EXCLUSIVE: "pool",
        "alpha.jobset.sigs.k8s.io/node-selector": "true",
    }
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert roles(gang) == [("workers", 8, False)]


def test_exclusive_pods_get_the_leader_or_follower_role_by_completion_index() -> None:
    obj = jobset("js", replicated_job("workers", 2, 4, 8))
    obj["metadata"]["annotations"] = {EXCLUSIVE: "pool"}
    leader, job0 = jobset_pod(obj, "workers", 0, 0, annotations={INDEX: "0"})
    follower, _ = jobset_pod(obj, "workers", 0, 3, annotations={INDEX: "3"})
    lookup = Lookup(obj, job0)
    lead = recognize_pod(leader, lookup, CONFIG)
    follow = recognize_pod(follower, lookup, CONFIG)
    assert lead is not None and follow is not None
    assert (lead.role, follow.role) == ("workers", "workers-followers")


def test_the_members_that_arrive_later_are_written_on_every_member_pod() -> None:
    obj = jobset("js", replicated_job("workers", 2, 4, 8))
    obj["metadata"]["annotations"] = {EXCLUSIVE: "pool"}
    leader, job0 = jobset_pod(obj, "workers", 0, 0, annotations={INDEX: "0"})
    nodes = [{"metadata": {"name": f"n{i}"}, "status": {"allocatable": {GPU: "8"}}}
             for i in range(8)]
    decision = decide_pod(leader, namespace="default",
                          capacity=Capacity.from_nodes(nodes, CONFIG),
                          lookup=Lookup(obj, job0), config=CONFIG)
    assert decision.patched is not None
    annotations = decision.patched["metadata"]["annotations"]
    assert annotations["gangkeeper.io/later-members"] == (
        '[{"count":6,"demand":{"nvidia.com/gpu":8}}]'
    )
    assert annotations["gangkeeper.io/min-member"] == "8"


def test_later_members_count_when_the_gang_could_never_fit() -> None:
    """The whole gang — later steps included — must fit: 1 driver + 4 later workers of
    8 GPUs on four 8-GPU nodes is refused."""
    obj = jobset(
        "js",
        replicated_job("driver", 1, 1, 8),
        replicated_job("workers", 1, 4, 8, depends_on=[("driver", "Ready")]),
    )
    nodes = [{"metadata": {"name": f"n{i}"}, "status": {"allocatable": {GPU: "8"}}}
             for i in range(4)]
    [decision] = validate_object(obj, capacity=Capacity.from_nodes(nodes, CONFIG),
                                 lookup=no_lookup, config=CONFIG)
    assert not decision.verdict.allowed
    assert "40" in decision.verdict.reason


def test_trainer_launcher_that_waits_for_the_nodes_to_be_ready_arrives_later() -> None:
    runtime = training_runtime(
        "deepspeed",
        replicated_job(
            "node", None, None, None, pod_template=template(pod_spec(container("node", 8)))
        ),
        replicated_job(
            "launcher", 1, 1, None, pod_template=template(pod_spec(container("node", 8))),
            job_labels={"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"},
            depends_on=[("node", "Ready")],
        ),
        mpi_launcher_as_node=True,
    )
    [gang] = recognize_object(trainjob("tj", "deepspeed", num_nodes=4), Lookup(runtime), CONFIG)
    assert roles(gang) == [("node", 3, False), ("launcher", 1, True)]
    assert gang.needed_before_release == 3


@pytest.mark.parametrize(("policy", "later"), [("LeaderReady", True), ("LeaderCreated", False),
                                               (None, False)])
def test_leader_ready_workers_arrive_after_the_leader(policy: str | None, later: bool) -> None:
    obj: dict[str, Any] = leader_worker_set("lws", replicas=1, size=4)
    if policy is not None:
        obj["spec"]["startupPolicy"] = policy
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert roles(gang) == [("leader", 1, False), ("worker", 3, later)]


def test_the_remembered_plan_follows_a_change_of_later_members() -> None:
    """Plans are remembered per pod shape (admission/plan_memo.py): a gang of the same name,
    minMember and owner whose later members differ gets its own annotation."""
    from dataclasses import replace

    from gangkeeper.policies.admission.plan_memo import PlanMemo
    from gangkeeper.policies.model import PodMembership

    obj = jobset("js", replicated_job("a", 1, 2, 1), replicated_job("b", 1, 2, 1))
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    member, _ = jobset_pod(obj, "a")
    memo = PlanMemo()
    first, _ = memo.plan(member, PodMembership(gang, "a"), CONFIG, "default")
    later = replace(gang, roles=(gang.roles[0], replace(gang.roles[1], later=True)))
    second, _ = memo.plan(member, PodMembership(later, "a"), CONFIG, "default")
    assert "gangkeeper.io/later-members" not in first.annotations
    assert second.annotations["gangkeeper.io/later-members"] == (
        '[{"count":2,"demand":{"nvidia.com/gpu":1}}]'
    )
