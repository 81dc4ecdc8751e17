"""Least-privilege RBAC: every rule with the reason it exists (emitted as a comment).

Pure: builds dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gangkeeper.policies.names import (
    APP_NAME,
    LEASE_NAME,
    MUTATING_WEBHOOK_CONFIGURATION,
    SECRET_NAME,
    VALIDATING_WEBHOOK_CONFIGURATION,
)

from .kinds import recognised_resources
from .objects import CertMode, Manifest, metadata


class RbacRule:
    """One PolicyRule and the reason it exists (emitted as a YAML comment)."""

    def __init__(
        self,
        why: str,
        groups: Sequence[str],
        resources: Sequence[str],
        verbs: Sequence[str],
        names: Sequence[str] = (),
    ) -> None:
        self.why = why
        self.rule: Manifest = {
            "apiGroups": list(groups),
            "resources": list(resources),
            "verbs": list(verbs),
        }
        if names:
            self.rule["resourceNames"] = list(names)


CONTROLLER_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "controller: watch gang pods and patch them to remove the gangkeeper.io/gang "
        "scheduling gate (patch, not update: never overwrites other fields)",
        [""],
        ["pods"],
        ["get", "list", "watch", "patch"],
    ),
    RbacRule(
        "controller: record why a gang waits or was released, on the pods' namespaces",
        ["", "events.k8s.io"],
        ["events"],
        ["create", "patch"],
    ),
    RbacRule(
        "controller: ensure the PodGroup the coscheduling (scheduling.x-k8s.io), volcano "
        "(scheduling.volcano.sh) or native (scheduling.k8s.io) backend needs; no update or "
        "delete: ownerReferences let the garbage collector remove them",
        ["scheduling.x-k8s.io", "scheduling.volcano.sh", "scheduling.k8s.io"],
        ["podgroups"],
        ["get", "list", "watch", "create"],
    ),
    RbacRule(
        "controller: touch an annotation of a released coscheduling PodGroup when GPUs "
        "free up, so the Coscheduling plugin retries its pods now (a PodGroup update is "
        "one of the two events it registers); patch only",
        ["scheduling.x-k8s.io"],
        ["podgroups"],
        ["patch"],
    ),
)

WEBHOOK_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "webhook + controller: node capacity (GPU allocatable, labels, taints) decides "
        "feasibility; read-only",
        [""],
        ["nodes"],
        ["list", "watch"],
    ),
    RbacRule(
        "webhook: objects between a pod and the workload that sizes its gang "
        "(LeaderWorkerSet -> StatefulSet -> pod; TrainJob -> (Cluster)TrainingRuntime); "
        "read-only caches, one direct get on a cache miss",
        ["apps"],
        ["statefulsets"],
        ["get", "list", "watch"],
    ),
    RbacRule(
        "webhook: the runtimes that give a TrainJob its shape; read-only",
        ["trainer.kubeflow.org"],
        ["trainingruntimes", "clustertrainingruntimes"],
        ["get", "list", "watch"],
    ),
)

_OWNER_REASON = (
    "webhook: size gangs from their owning workloads, one rule per API group of the "
    "recognisers' kinds (list+watch caches, one direct get on a cache miss); read-only"
)


def owner_rules() -> tuple[RbacRule, ...]:
    """Read access to every workload kind a recogniser knows, grouped by API group.

    Derived from the recognisers, like the webhook rules, so a new kind gets its RBAC with
    no edit here; resources the controller rule already covers (PodGroups) are left out.
    """
    covered = {
        (group, resource)
        for rule in CONTROLLER_RULES
        for group in rule.rule["apiGroups"]
        for resource in rule.rule["resources"]
    }
    by_group: dict[str, list[str]] = {}
    for group, _versions, resource in recognised_resources():
        if (group, resource) not in covered and resource not in by_group.get(group, []):
            by_group.setdefault(group, []).append(resource)
    return tuple(
        RbacRule(_OWNER_REASON, [group], sorted(resources), ["get", "list", "watch"])
        for group, resources in sorted(by_group.items())
    )


#: Self-managed certificates only (absent in cert-manager mode).
CABUNDLE_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "certs: re-inject the caBundle into gangkeeper's own two webhook configurations "
        "(and only those: resourceNames)",
        ["admissionregistration.k8s.io"],
        ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        ["get", "patch"],
        [MUTATING_WEBHOOK_CONFIGURATION, VALIDATING_WEBHOOK_CONFIGURATION],
    ),
)

NAMESPACED_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "controller: leader election on its Lease; create cannot be limited by name "
        "(the Lease does not exist on first start), get/update only on that Lease",
        ["coordination.k8s.io"],
        ["leases"],
        ["create"],
    ),
    RbacRule(
        "controller: leader election renew/acquire",
        ["coordination.k8s.io"],
        ["leases"],
        ["get", "update"],
        [LEASE_NAME],
    ),
)

SECRET_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "certs: the replicas share one CA + serving certificate in this Secret (shipped "
        "empty by these manifests, so no create is needed); only this Secret",
        [""],
        ["secrets"],
        ["get", "update"],
        [SECRET_NAME],
    ),
)


def rule_reason(rule: Mapping[str, Any]) -> str | None:
    """The justification of an emitted PolicyRule (None for an unknown rule)."""
    every = (
        *CONTROLLER_RULES,
        *WEBHOOK_RULES,
        *owner_rules(),
        *CABUNDLE_RULES,
        *NAMESPACED_RULES,
        *SECRET_RULES,
    )
    for known in every:
        if known.rule == dict(rule):
            return known.why
    return None


def _role(kind: str, name: str, namespace: str | None, rules: Iterable[RbacRule]) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata(name, namespace),
        "rules": [r.rule for r in rules],
    }


def _binding(
    kind: str, role_kind: str, name: str, namespace: str, bound_ns: str | None
) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata(name, bound_ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": APP_NAME, "namespace": namespace}],
    }


def rbac_objects(namespace: str, cert_mode: CertMode) -> list[Manifest]:
    cluster_rules = [*CONTROLLER_RULES, *WEBHOOK_RULES, *owner_rules()]
    namespaced = list(NAMESPACED_RULES)
    if cert_mode == "self":
        cluster_rules += CABUNDLE_RULES
        namespaced += SECRET_RULES
    return [
        _role("ClusterRole", APP_NAME, None, cluster_rules),
        _binding("ClusterRoleBinding", "ClusterRole", APP_NAME, namespace, None),
        _role("Role", APP_NAME, namespace, namespaced),
        _binding("RoleBinding", "Role", APP_NAME, namespace, namespace),
    ]
