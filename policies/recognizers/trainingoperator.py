"""The Kubeflow training-operator family (kubeflow.org/v1), implemented once.

PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob and JAXJob share one shape: a map
of replica specs (`spec.<x>ReplicaSpecs`, keyed by replica type such as Master or
Worker), each with `replicas` (default 1) and a pod `template`. The gang is all their
replicas, one role per replica type; `spec.runPolicy.schedulingPolicy.minAvailable`,
when set, is the minMember, as the operator gives its own PodGroups (training-operator
v1.9.0 `pkg/controller.v1/common/job.go`). An elastic PyTorchJob without it
(`spec.elasticPolicy.minReplicas`, `pkg/apis/kubeflow.org/v1/pytorch_types.go`) needs
minReplicas workers plus its Master, if any — the convention of KAI scheduler's pod
grouper and kubeflow/trainer#1571; members beyond the minimum are released as they
come. Each kind is one row of `KINDS`, a `TrainingOperatorRecognizer` that
the registry registers from there: adding a kind of the family is one row.

Pods are matched through their controller ownerReference (the operator always sets
it) and their replica-type label; there is no fallback by name: the job holds the size.

Pure: reads dicts and calls the caller's lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model import Gang, KubeObject, OwnerLookup, PodMembership
from ..podspec import as_mapping, field_path
from ..settings.config import Config
from .base import PodSignals, Requeuing, ResourceRule
from .common import (
    build_gang,
    claims,
    count,
    owner_chain,
    owner_gangs,
    read_meta,
    role_named,
    template_role,
    topmost,
)

GROUP = "kubeflow.org"
#: Set by the training-operator on every pod it creates (value in lower case); the
#: mpi-operator v2 sets job-role instead.
REPLICA_TYPE_LABELS = ("training.kubeflow.org/replica-type", "training.kubeflow.org/job-role")
#: Every label the training-operator sets on pods (job-name too) has this prefix.
POD_LABEL_PREFIX = "training.kubeflow.org/"
#: The operator recreates a deleted replica pod.
_RECREATED = Requeuing("recreate")


def _elastic_minimum(spec: Mapping[str, Any], replica_specs: Mapping[str, Any]) -> int | None:
    """minReplicas workers plus the Master replicas of an elastic PyTorchJob; None if
    it is not elastic (or sets no minimum)."""
    elastic = as_mapping(spec.get("elasticPolicy"), "spec.elasticPolicy")
    raw = elastic.get("minReplicas")
    if raw is None:
        return None
    minimum = count(raw, "spec.elasticPolicy.minReplicas", 0)
    for replica_type, replica in replica_specs.items():
        if str(replica_type).lower() == "master" and isinstance(replica, Mapping):
            path = f"spec.pytorchReplicaSpecs.{replica_type}.replicas"
            minimum += count(replica.get("replicas"), path, 1)
    return minimum or None


@dataclass(frozen=True)
class TrainingOperatorRecognizer:
    """A recogniser for one kind of the family; a row of `KINDS` only fills the names."""

    name: str
    kind: str
    plural: str
    #: The spec field of the replica specs, keyed by replica type.
    replica_specs: str
    versions: tuple[str, ...] = ("v1",)

    @property
    def rules(self) -> tuple[ResourceRule, ...]:
        return (ResourceRule(GROUP, self.versions, self.plural, self.kind),)

    @property
    def pod_label_prefixes(self) -> tuple[str, ...]:
        return (POD_LABEL_PREFIX,)

    @property
    def requeue(self) -> Requeuing:
        return _RECREATED

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        if not claims(obj, (GROUP, self.kind), self.versions):
            return None
        meta = read_meta(obj)
        spec = as_mapping(obj.get("spec"), "spec", required=True)
        specs_path = field_path("spec", self.replica_specs)
        replica_specs = as_mapping(spec.get(self.replica_specs), specs_path, required=True)
        parts = []
        for replica_type, replica in replica_specs.items():
            path = field_path(specs_path, str(replica_type))
            body = as_mapping(replica, path, required=True)
            replicas = count(body.get("replicas"), field_path(path, "replicas"), 1)
            parts.append(
                template_role(
                    str(replica_type),
                    replicas,
                    body.get("template"),
                    field_path(path, "template"),
                    config,
                )
            )
        policy_path = "spec.runPolicy.schedulingPolicy"
        run_policy = as_mapping(spec.get("runPolicy"), "spec.runPolicy")
        scheduling = as_mapping(run_policy.get("schedulingPolicy"), policy_path)
        min_available = scheduling.get("minAvailable")
        min_member = (
            count(min_available, field_path(policy_path, "minAvailable"), 0) or None
            if min_available is not None
            else None
        )
        if min_member is None and self.kind == "PyTorchJob":
            min_member = _elastic_minimum(spec, replica_specs)
        gang = build_gang(meta, meta.name, parts, self.name, min_member)
        return [gang] if gang is not None else []

    def may_claim(self, signals: PodSignals) -> bool:
        return (GROUP, self.kind) in signals.owners

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        meta = read_meta(pod)
        link = topmost(owner_chain(pod, meta.namespace, lookup), {(GROUP, self.kind)}, set())
        if link is None or link.obj is None:
            return None
        gangs = owner_gangs(self, link.obj, lookup, config)
        if not gangs:
            return None
        for label in REPLICA_TYPE_LABELS:
            role = role_named(gangs[0], meta.labels.get(label, ""))
            if role is not None:
                return PodMembership(gangs[0], role)
        return None


#: The family, one row per kind, in the order the registry asks them about pods.
#: MPIJob is both the training-operator's kubeflow.org/v1 and the mpi-operator's
#: v2beta1 (the one its upstream examples use): both keep `spec.mpiReplicaSpecs`
#: (Launcher, Worker).
KINDS: tuple[TrainingOperatorRecognizer, ...] = (
    TrainingOperatorRecognizer("pytorchjob", "PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs"),
    TrainingOperatorRecognizer("tfjob", "TFJob", "tfjobs", "tfReplicaSpecs"),
    TrainingOperatorRecognizer(
        "mpijob", "MPIJob", "mpijobs", "mpiReplicaSpecs", versions=("v1", "v2beta1")
    ),
    TrainingOperatorRecognizer("xgboostjob", "XGBoostJob", "xgboostjobs", "xgbReplicaSpecs"),
    TrainingOperatorRecognizer("paddlejob", "PaddleJob", "paddlejobs", "paddleReplicaSpecs"),
    TrainingOperatorRecognizer("jaxjob", "JAXJob", "jaxjobs", "jaxReplicaSpecs"),
)
