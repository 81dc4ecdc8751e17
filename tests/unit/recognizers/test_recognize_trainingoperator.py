"""The training-operator family: Σ replicaSpecs replicas, roles kept apart
(recognizers/trainingoperator.py and its per-kind modules)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import (
    GPU,
    TRAINING_KINDS,
    Lookup,
    no_lookup,
    pod_from,
    training_job,
    training_pod,
)

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.recognizers.registry import (
    default_registry,
    recognize_object,
    recognize_pod,
)
from gangkeeper.policies.settings.config import Config

CONFIG = Config()

#: Each kind with the replica types its upstream examples use.
KINDS = {
    "PyTorchJob": {"Master": (1, 2), "Worker": (3, 2)},
    "TFJob": {"Chief": (1, 1), "PS": (2, 0), "Worker": (4, 1)},
    "MPIJob": {"Launcher": (1, 0), "Worker": (2, 8)},
    "XGBoostJob": {"Master": (1, 1), "Worker": (2, 1)},
    "PaddleJob": {"Master": (1, 1), "Worker": (2, 2)},
    "JAXJob": {"Worker": (4, 4)},
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_sums_its_replicas_with_one_role_per_replica_type(kind: str) -> None:
    replicas = KINDS[kind]
    [gang] = recognize_object(training_job(kind, "run", replicas), no_lookup, CONFIG)
    assert gang.name == "run"
    assert gang.min_member == sum(n for n, _ in replicas.values())
    assert {r.name: r.count for r in gang.roles} == {t: n for t, (n, _) in replicas.items()}
    expected = sum(n * g for n, g in replicas.values())
    assert gang.total_demand() == ({GPU: expected} if expected else {})
    assert gang.source.kind == kind
    assert gang.source.api_version == TRAINING_KINDS[kind][0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_has_a_webhook_rule(kind: str) -> None:
    rules = {(r.group, r.kind): r for rec in default_registry() for r in rec.rules}
    rule = rules[("kubeflow.org", kind)]
    assert rule.resource == kind.lower() + "s"
    assert TRAINING_KINDS[kind][0].split("/")[1] in rule.versions


def test_replicas_default_to_one() -> None:
    [gang] = recognize_object(
        training_job("PyTorchJob", "run", {"Master": (None, 1), "Worker": (2, 1)}),
        no_lookup,
        CONFIG,
    )
    assert gang.min_member == 3


def test_min_available_sets_min_member() -> None:
    obj = training_job("PyTorchJob", "run", {"Master": (1, 1), "Worker": (7, 1)}, min_available=5)
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert (gang.min_member, gang.size) == (5, 8)


def test_a_single_replica_job_is_not_a_gang() -> None:
    obj = training_job("PyTorchJob", "run", {"Master": (1, 1)})
    assert recognize_object(obj, no_lookup, CONFIG) == []


@pytest.mark.parametrize(("replica_type", "role"), [("Master", "Master"), ("Worker", "Worker")])
def test_a_pod_gets_the_role_of_its_replica_type(replica_type: str, role: str) -> None:
    owner = training_job("PyTorchJob", "run", {"Master": (1, 1), "Worker": (3, 1)})
    membership = recognize_pod(training_pod(owner, replica_type), Lookup(owner), CONFIG)
    assert membership is not None
    assert membership.role == role
    assert membership.gang == recognize_object(owner, no_lookup, CONFIG)[0]


def test_an_mpi_operator_pod_with_the_job_role_label_is_recognised() -> None:
    owner = training_job("MPIJob", "pi", {"Launcher": (1, 0), "Worker": (2, 1)})
    tmpl = owner["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    member = pod_from(
        tmpl, "pi-worker-0", labels={"training.kubeflow.org/job-role": "worker"}, owner=owner
    )
    membership = recognize_pod(member, Lookup(owner), CONFIG)
    assert membership is not None
    assert membership.role == "Worker"


def test_a_pod_whose_job_is_unknown_is_not_sized() -> None:
    owner = training_job("PyTorchJob", "run")
    assert recognize_pod(training_pod(owner, "Worker"), no_lookup, CONFIG) is None


def test_a_pod_without_a_replica_type_is_not_given_a_role_by_guessing() -> None:
    owner = training_job("PyTorchJob", "run")
    member = training_pod(owner, "Worker")
    del member["metadata"]["labels"]["training.kubeflow.org/replica-type"]
    assert recognize_pod(member, Lookup(owner), CONFIG) is None


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda j: j["spec"].pop("pytorchReplicaSpecs"), "spec.pytorchReplicaSpecs"),
        (lambda j: j["spec"].update(pytorchReplicaSpecs=[]), "spec.pytorchReplicaSpecs"),
        (
            lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas=-3),
            "spec.pytorchReplicaSpecs.Worker.replicas",
        ),
        (
            lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas=2.5),
            "spec.pytorchReplicaSpecs.Worker.replicas",
        ),
        (
            lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"].pop("template"),
            "spec.pytorchReplicaSpecs.Worker.template",
        ),
        (
            lambda j: j["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][
                0
            ]["resources"]["limits"].update({GPU: "1.5"}),
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits"
            '["nvidia.com/gpu"]',
        ),
        (
            lambda j: j["spec"].update(runPolicy={"schedulingPolicy": {"minAvailable": -1}}),
            "spec.runPolicy.schedulingPolicy.minAvailable",
        ),
    ],
)
def test_a_malformed_job_is_an_error_naming_the_field(mutate: Any, path: str) -> None:
    obj = training_job("PyTorchJob", "run")
    mutate(obj)
    with pytest.raises(InvalidObject) as error:
        recognize_object(obj, no_lookup, CONFIG)
    assert error.value.path == path


# --- Elastic PyTorchJob ----------------------------------------------------------------
# Shapes: kubeflow/training-operator v1.9.0 examples/pytorch/elastic/imagenet/imagenet.yaml
# (Worker replicas with elasticPolicy.minReplicas/maxReplicas, no Master) and
# pkg/apis/kubeflow.org/v1/pytorch_types.go (ElasticPolicy.MinReplicas). Rule:
# pkg/controller.v1/common/job.go (PodGroup minMember = all replicas unless
# schedulingPolicy.minAvailable); for elastic jobs minReplicas (+ Master), the
# convention of KAI scheduler's pod grouper and kubeflow/trainer#1571.


def _elastic(
    workers: int, min_replicas: int | None, *, master: bool = False,
    min_available: int | None = None,
) -> dict[str, Any]:
    replicas = {"Master": (1, 1), "Worker": (workers, 1)} if master else {"Worker": (workers, 1)}
    obj = training_job("PyTorchJob", "elastic", replicas, min_available=min_available)
    policy: dict[str, Any] = {"rdzvBackend": "c10d", "maxReplicas": workers}
    if min_replicas is not None:
        policy["minReplicas"] = min_replicas
    obj["spec"]["elasticPolicy"] = policy
    return obj


@pytest.mark.parametrize(
    ("master", "min_replicas", "min_available", "minimum"),
    [
        (False, 1, None, 1),  # imagenet.yaml: minReplicas 1, maxReplicas 3
        (False, 2, None, 2),
        (True, 2, None, 3),  # plus the Master
        (True, 2, 5, 5),  # minAvailable wins when set
        (False, None, None, 4),  # no minimum: all replicas
    ],
)
def test_an_elastic_pytorchjob_needs_min_replicas_plus_its_master(
    master: bool, min_replicas: int | None, min_available: int | None, minimum: int
) -> None:
    obj = _elastic(4, min_replicas, master=master, min_available=min_available)
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert gang.min_member == min(minimum, gang.size)


def test_elastic_policy_is_read_only_for_pytorchjobs() -> None:
    obj = training_job("TFJob", "tf", {"Worker": (4, 1)})
    obj["spec"]["elasticPolicy"] = {"minReplicas": 1}
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert gang.min_member == 4
