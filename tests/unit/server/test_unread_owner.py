"""A GPU pod whose owner gangkeeper cannot read (offline `serve` without that owner in
`--owners`) is let through unchanged, as before, but the answer says why: a warning
naming the owner and, offline, how to give it."""

from __future__ import annotations

import json
from typing import Any

from builders.gangs import node
from builders.workloads import gpu_spec, no_lookup, pod, training_job, training_pod

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.server import admission
from gangkeeper.webhook.server.admission import Policy, parse_review
from gangkeeper.webhook.server.app import Server
from gangkeeper.webhook.server.cluster_view import StaticClusterView

CONFIG = Config()
OWNER = training_job("PyTorchJob", "llama", {"Master": (1, 1), "Worker": (3, 1)})


def mutate(pod: dict[str, Any], policy: Policy) -> dict[str, Any]:
    request = {
        "uid": "u1", "operation": "CREATE", "namespace": "default", "object": pod,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "userInfo": {"username": "alice"},
    }
    review = parse_review(json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode())
    response: dict[str, Any] = admission.mutate(review, policy).review["response"]
    return response


def deployment_like_pod() -> dict[str, Any]:
    """A GPU pod a ReplicaSet owns: no recogniser reads ReplicaSets, so none is missed."""
    replica_set = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                   "metadata": {"name": "web-5d8", "namespace": "default", "uid": "rs"}}
    return pod("web-5d8-x", gpu_spec(1), owner=replica_set)


def offline_policy(*owners: dict[str, Any]) -> Policy:
    """What offline `gangkeeper serve --nodes FILE [--owners FILE]` decides with."""
    view = StaticClusterView([node("n0", 8)], CONFIG, owners)
    return Server(config=CONFIG, view=view).policy()


def test_offline_a_pod_of_an_owner_not_given_is_let_through_saying_how_to_give_it() -> None:
    response = mutate(training_pod(OWNER, "Worker"), offline_policy())
    assert response["allowed"] is True
    assert "patch" not in response, "the verdict is unchanged: let through untouched"
    [warning] = response["warnings"]
    assert "PyTorchJob default/llama" in warning
    assert "--owners FILE" in warning
    assert len(warning) <= 120


def test_offline_with_the_owner_given_the_pod_is_ganged_without_that_warning() -> None:
    response = mutate(training_pod(OWNER, "Worker"), offline_policy(OWNER))
    assert "patch" in response
    assert not any("--owners" in w for w in response.get("warnings", []))


def test_in_a_cluster_the_warning_names_the_owner_without_the_offline_hint() -> None:
    capacity = Capacity.from_nodes([node("n0", 8)], CONFIG)
    policy = Policy(capacity=capacity, lookup=no_lookup, config=CONFIG)
    response = mutate(training_pod(OWNER, "Worker"), policy)
    assert response["allowed"] is True and "patch" not in response
    [warning] = response["warnings"]
    assert "PyTorchJob default/llama" in warning and "--owners" not in warning


def test_a_pod_of_a_kind_no_recogniser_reads_gets_no_warning() -> None:
    response = mutate(deployment_like_pod(), offline_policy())
    assert response["allowed"] is True
    assert not response.get("warnings")


def test_a_pod_without_gpus_of_an_unread_owner_gets_no_warning() -> None:
    cpu_only = training_job("PyTorchJob", "prep", {"Master": (1, None), "Worker": (1, None)})
    response = mutate(training_pod(cpu_only, "Worker"), offline_policy())
    assert not response.get("warnings")
