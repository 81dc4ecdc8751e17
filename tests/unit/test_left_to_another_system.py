"""A pod another gang system already gangs (Kueue pod groups, Trainer's podGroupPolicy,
KubeRay's batch scheduler, Volcano) is left to it under onConflict: skip, and the
admission answer says so in a warning naming the system and its key."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from builders.gangs import node
from builders.workloads import Lookup, job, pod_from

from gangkeeper.policies.admission.decision import decide_pod
from gangkeeper.policies.admission.mutation import plan_pod
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.model import PodMembership
from gangkeeper.policies.recognizers.registry import recognize_pod
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.server import admission
from gangkeeper.webhook.server.admission import Policy, parse_review

CONFIG = Config(on_conflict="skip")


def owned_pod(owner: dict[str, Any], **keys: dict[str, str]) -> dict[str, Any]:
    pod = pod_from(owner["spec"]["template"], "train-0", owner=owner, **keys)
    labels = pod["metadata"].setdefault("labels", {})
    labels["batch.kubernetes.io/job-name"] = owner["metadata"]["name"]
    return pod


def mutate(pod: dict[str, Any], lookup: Lookup) -> dict[str, Any]:
    request = {
        "uid": "u1", "operation": "CREATE", "namespace": "default", "object": pod,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "userInfo": {"username": "alice"},
    }
    review = parse_review(json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode())
    capacity = Capacity.from_nodes([node("n0", 8)], CONFIG)
    answer = admission.mutate(review, Policy(capacity=capacity, lookup=lookup, config=CONFIG))
    response: dict[str, Any] = answer.review["response"]
    return response


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ({"labels": {"kueue.x-k8s.io/pod-group-name": "theirs"}},
         "to Kueue (label kueue.x-k8s.io/pod-group-name=theirs)"),
        ({"annotations": {"scheduling.k8s.io/group-name": "pg"}},
         "to Volcano (annotation scheduling.k8s.io/group-name=pg)"),
    ],
)
def test_a_pod_another_system_gangs_is_let_through_with_a_warning_naming_it(
    keys: dict[str, dict[str, str]], said: str
) -> None:
    owner = job("train", 1, parallelism=2)
    response = mutate(owned_pod(owner, **keys), Lookup(owner))
    assert response["allowed"] is True
    assert "patch" not in response
    assert response.get("warnings") == [f"gangkeeper left pod train-0 {said}"]


def test_the_decision_carries_the_same_warning() -> None:
    owner = job("train", 1, parallelism=2)
    pod = owned_pod(owner, labels={"kueue.x-k8s.io/pod-group-name": "theirs"})
    capacity = Capacity.from_nodes([node("n0", 8)], CONFIG)
    decision = decide_pod(pod, namespace="default", capacity=capacity, lookup=Lookup(owner),
                          config=CONFIG)
    assert decision.patched is None
    assert "gangkeeper left pod train-0 to Kueue (" in " ".join(decision.verdict.warnings)


def test_a_gang_keyed_elsewhere_is_left_to_that_system_in_the_plan() -> None:
    owner = job("train", 1, parallelism=2)
    pod = owned_pod(owner)
    membership = recognize_pod(pod, Lookup(owner), CONFIG)
    assert membership is not None
    keyed = "Kubeflow Trainer podGroupPolicy.coscheduling (label scheduling.x-k8s.io/pod-group)"
    theirs = PodMembership(dataclasses.replace(membership.gang, keyed_by=keyed), membership.role)
    plan = plan_pod(pod, theirs, CONFIG, "default")
    assert plan.outcome == "skip"
    assert plan.left_to == keyed


def test_an_unconflicted_pod_gets_no_such_warning() -> None:
    owner = job("train", 1, parallelism=2)
    response = mutate(owned_pod(owner), Lookup(owner))
    assert response["allowed"] is True and "patch" in response
    assert not any("left pod" in w for w in response.get("warnings", []))
