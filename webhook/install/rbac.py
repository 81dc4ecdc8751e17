"""Least-privilege RBAC: every rule with the reason it exists (emitted as a comment).

The rules about workload kinds (read each kind and the owners its recogniser follows,
patch those whose gangs are requeued by suspension) are derived from what the
recognisers declare (`kinds`), with the reasons they give. Pure: builds dicts.
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

from .kinds import followed_owner_resources, recognised_resources, requeued_kinds
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


_POD_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "controller: watch gang pods and patch them to remove the gangkeeper.io/gang "
        "scheduling gate and pin them to their node (patch, not update: never overwrites "
        "other fields; the gangkeeper-pod-updates policy bounds which fields); delete "
        "released members whose pinned node was taken (or the whole gang: rebindScope, "
        "podsReadyRequeue), for an owner that cannot be suspended (LeaderWorkerSet) to "
        "recreate (rebindSeconds); "
        "no get: pods come from the watch",
        [""],
        ["pods"],
        ["list", "watch", "patch", "delete"],
    ),
)

_EVENT_AND_GROUP_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "controller: record why a gang waits, on the pods' namespaces (events.k8s.io/v1 "
        "Events, created once per gang and cause: no patch)",
        ["events.k8s.io"],
        ["events"],
        ["create"],
    ),
    RbacRule(
        "controller: create the PodGroup the coscheduling (scheduling.x-k8s.io), volcano "
        "(scheduling.volcano.sh) or native (scheduling.k8s.io) backend needs (409: it "
        "exists, so no read is needed); no update or delete: ownerReferences let the "
        "garbage collector remove them",
        ["scheduling.x-k8s.io", "scheduling.volcano.sh", "scheduling.k8s.io"],
        ["podgroups"],
        ["create"],
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

_NODE_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "webhook + controller: node capacity (GPU allocatable, labels, taints) decides "
        "feasibility; read-only",
        [""],
        ["nodes"],
        ["list", "watch"],
    ),
)


_DEVICE_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "webhook and controller: devices published through Dynamic Resource Allocation "
        "(ResourceSlices, DeviceClasses), what claim templates and shared claims ask and "
        "which devices claims hold, so a gang of DRA devices that could never fit is "
        "refused and one waits until its devices are free, like a GPU gang; read-only",
        ["resource.k8s.io"],
        ["resourceslices", "deviceclasses", "resourceclaimtemplates", "resourceclaims"],
        ["list", "watch"],
    ),
)


def suspend_rules() -> tuple[RbacRule, ...]:
    """Patch on every kind whose gangs are requeued by suspension (`Requeuing`), with
    the reason its recogniser gives."""
    return tuple(
        RbacRule(f"controller: {requeue.why}", [rule.group], [rule.resource], ["patch"])
        for rule, requeue in requeued_kinds("suspend")
    )


def followed_rules() -> tuple[RbacRule, ...]:
    """Read access to the owners the recognisers follow besides their own kinds, one rule
    per API group and reason (resources in the order the recognisers declare them)."""
    by_reason: dict[tuple[str, str], list[str]] = {}
    for owner in followed_owner_resources():
        resources = by_reason.setdefault((owner.group, owner.why), [])
        if owner.resource not in resources:
            resources.append(owner.resource)
    return tuple(
        RbacRule(f"webhook: {why}", [group], resources, ["get", "list", "watch"])
        for (group, why), resources in by_reason.items()
    )


_PREEMPTION_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "controller: preempt a pod of no gang for a waiting gang of higher priority "
        "through the Eviction API, so PodDisruptionBudgets hold (create only)",
        [""],
        ["pods/eviction"],
        ["create"],
    ),
    RbacRule(
        "controller: read PodDisruptionBudgets to choose preemption victims the Eviction "
        "API will let go; read-only",
        ["policy"],
        ["poddisruptionbudgets"],
        ["list", "watch"],
    ),
)


def controller_rules() -> tuple[RbacRule, ...]:
    return (*_POD_RULES, *suspend_rules(), *_EVENT_AND_GROUP_RULES, *_PREEMPTION_RULES)


def webhook_rules() -> tuple[RbacRule, ...]:
    return (*_NODE_RULES, *_DEVICE_RULES, *followed_rules())


_OWNER_REASON = (
    "webhook: size gangs from their owning workloads, one rule per API group of the "
    "recognisers' kinds (list+watch caches, one direct get on a cache miss); read-only"
)


def owner_rules() -> tuple[RbacRule, ...]:
    """Read access to every workload kind a recogniser knows, grouped by API group.

    Derived from the recognisers, like the webhook rules, so a new kind gets its RBAC with
    no edit here; resources another rule already lets gangkeeper read are left out.
    """
    read = {"get", "list", "watch"}
    covered = {
        (group, resource)
        for rule in (*controller_rules(), *webhook_rules())
        if read <= set(rule.rule["verbs"])
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


#: Placeholder capacity only (`autoscaling: placeholders`, the default; absent with
#: `gangkeeper manifests --autoscaling off`). Last among the ClusterRole's rules, so
#: the indexes of the others (which the cert-manager overlay tests) do not move.
AUTOSCALING_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "controller: create the placeholder pods of a gang that waits for nodes an "
        "autoscaler must add (cluster-autoscaler and Karpenter ignore gated pods), copying "
        "one member's spec (get: the informer keeps members reduced), and delete them "
        "(grace 0) when the gang is released, the ask times out or the gang is gone; RBAC "
        "cannot limit create/delete to their label, so the controller deletes only pods "
        "carrying gangkeeper.io/placeholder-for, by uid",
        [""],
        ["pods"],
        ["get", "create", "delete"],
    ),
)

#: ProvisioningRequests only (`autoscaling: provisioningrequest`; `gangkeeper manifests
#: --autoscaling provisioningrequest`), beside the placeholder rules, which stand in
#: where the cluster does not serve the API. After those, for the same reason.
PROVISIONING_RULES: tuple[RbacRule, ...] = (
    RbacRule(
        "controller: one PodTemplate per member shape of a gang that asks cluster-autoscaler "
        "for nodes through a ProvisioningRequest (the request names them); list+watch to "
        "find its own after a restart (labelled gangkeeper.io/provisioning-for), delete "
        "those of no live request; no update: a request's templates never change",
        [""],
        ["podtemplates"],
        ["list", "watch", "create", "delete"],
    ),
    RbacRule(
        "controller: one ProvisioningRequest per gang and attempt (autoscaling.x-k8s.io/v1); "
        "list+watch read their status conditions (Provisioned, Failed, BookingExpired, "
        "CapacityRevoked: cluster-autoscaler writes them, gangkeeper never writes status, "
        "so no provisioningrequests/status rule); delete a retried or orphaned one",
        ["autoscaling.x-k8s.io"],
        ["provisioningrequests"],
        ["list", "watch", "create", "delete"],
    ),
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
        *controller_rules(),
        *webhook_rules(),
        *owner_rules(),
        *CABUNDLE_RULES,
        *AUTOSCALING_RULES,
        *PROVISIONING_RULES,
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


def rbac_objects(
    namespace: str, cert_mode: CertMode, *, autoscaling: bool = True,
    provisioning_requests: bool = False,
) -> list[Manifest]:
    cluster_rules = [*controller_rules(), *webhook_rules(), *owner_rules()]
    namespaced = list(NAMESPACED_RULES)
    if cert_mode == "self":
        cluster_rules += CABUNDLE_RULES
        namespaced += SECRET_RULES
    if autoscaling:
        cluster_rules += AUTOSCALING_RULES
    if autoscaling and provisioning_requests:
        cluster_rules += PROVISIONING_RULES
    return [
        _role("ClusterRole", APP_NAME, None, cluster_rules),
        _binding("ClusterRoleBinding", "ClusterRole", APP_NAME, namespace, None),
        _role("Role", APP_NAME, namespace, namespaced),
        _binding("RoleBinding", "Role", APP_NAME, namespace, namespace),
    ]
