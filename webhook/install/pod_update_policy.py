"""The ValidatingAdmissionPolicy that limits what gangkeeper's own pod patches may change.

RBAC can grant `patch` on pods but cannot say which fields: with the ServiceAccount's
token, anyone could change a training pod's image or labels. This policy (and its
binding) matches only pod UPDATEs made by gangkeeper's ServiceAccount and lets them
change only what the controller writes:
  - `spec.schedulingGates`: unchanged, or only gangkeeper's gate removed;
  - `spec.affinity`: only the placement pin added to the required node affinity —
    `matchFields: metadata.name In [node]` appended to terms, or one term holding just
    that where there was none (`assigner.pin`); every other part of `affinity` and
    every expression and other field of a term unchanged (the API server itself
    allows affinity changes only while a pod is gated, and only as additions);
  - `spec.nodeSelector`: only `kubernetes.io/hostname` added (the pin versions before
    the matchFields pin wrote: an old leader still writes it during a rolling update);
  - labels and annotations under `gangkeeper.io/`: added, changed or removed;
  - exactly two other annotations, cluster-autoscaler's ProvisioningRequest consume
    keys (`autoscaling.x-k8s.io/consume-provisioning-request` and
    `autoscaling.x-k8s.io/provisioning-class-name`), written on release with
    `autoscaling: provisioningrequest`, as Kueue writes them;
and nothing else the API server lets a pod UPDATE change (container and init container
images, activeDeadlineSeconds, tolerations, terminationGracePeriodSeconds,
ownerReferences, finalizers, every other label and annotation). Sub-resources
(status, binding, eviction, resize, ephemeralcontainers) are not in gangkeeper's RBAC.

Pure: builds dicts.
"""

from __future__ import annotations

from gangkeeper.policies.assigner.pin import PIN_FIELD
from gangkeeper.policies.names import (
    APP_NAME,
    CONSUME_PROVISIONING_REQUEST_ANNOTATION,
    GATE,
    PIN_LABEL,
    POD_UPDATE_POLICY,
    PROVISIONING_CLASS_ANNOTATION,
)

from .objects import Manifest, metadata

#: Labels and annotations gangkeeper owns.
OWN_PREFIX = GATE.split("/", 1)[0] + "/"

#: Annotations outside gangkeeper.io/ the controller writes (the release onto a
#: provisioned ProvisioningRequest).
OTHER_ANNOTATIONS = (CONSUME_PROVISIONING_REQUEST_ANNOTATION, PROVISIONING_CLASS_ANNOTATION)

#: Fields a pod UPDATE may change that the controller never writes: "<object>.<path>".
UNCHANGED = (
    "spec.activeDeadlineSeconds",
    "spec.tolerations",
    "spec.terminationGracePeriodSeconds",
    "metadata.ownerReferences",
    "metadata.finalizers",
)


def _unchanged(path: str) -> str:
    """CEL: `path` is absent from both, or present in both with the same value."""
    parent, _, leaf = path.rpartition(".")
    new, old = f"object.{parent}", f"oldObject.{parent}"
    return (
        f"has({new}.{leaf}) == has({old}.{leaf}) && "
        f"(!has({new}.{leaf}) || {new}.{leaf} == {old}.{leaf})"
    )


def _only_own_keys_change(field: str, others: tuple[str, ...] = ()) -> str:
    """CEL: the map `metadata.<field>` differs from the old one only in gangkeeper.io/ keys
    (and the keys `others`)."""
    new, old = f"variables.new_{field}", f"variables.old_{field}"
    own = " || ".join([f"k.startsWith('{OWN_PREFIX}')", *(f"k == '{k}'" for k in others)])
    return (
        f"{new}.all(k, {own} || (k in {old} && {old}[k] == {new}[k])) && "
        f"{old}.all(k, {own} || k in {new})"
    )


def _map_variable(name: str, obj: str, path: str) -> Manifest:
    parent, _, leaf = path.rpartition(".")
    return {
        "name": name,
        "expression": f"has({obj}.{parent}.{leaf}) ? {obj}.{parent}.{leaf} : {{}}",
    }


#: CEL: the matchFields requirement `r` is a pin (`assigner.pin.pin_requirement`).
_PIN = (f"r.key == '{PIN_FIELD}' && r.operator == 'In' && "
        "r.?values.orValue([]).size() == 1")


def _terms(obj: str) -> str:
    """CEL: the required node affinity terms of `obj` ([] when none)."""
    return (f"{obj}.spec.?affinity.?nodeAffinity"
            ".?requiredDuringSchedulingIgnoredDuringExecution.?nodeSelectorTerms.orValue([])")


def _affinity_pinned_only() -> str:
    """CEL: `spec.affinity` changed only by the pin: pod (anti-)affinity and preferred
    node affinity unchanged; where there were no required terms, none or one term of
    just a pin; else, term by term, the same expressions and the same fields but pins.
    (Terms are compared as lists: CEL before Kubernetes 1.32 has no index variable.)"""
    same = " && ".join(
        f"object.spec.?affinity{p} == oldObject.spec.?affinity{p}"
        for p in (".?podAffinity", ".?podAntiAffinity",
                  ".?nodeAffinity.?preferredDuringSchedulingIgnoredDuringExecution")
    )
    new, old = "variables.new_terms", "variables.old_terms"
    exprs = "{0}.map(t, t.?matchExpressions.orValue([]))"
    fields = f"{{0}}.map(t, t.?matchFields.orValue([]).filter(r, !({_PIN})))"
    one_pin = (f"{new}.size() == 1 && {new}.all(t, t.?matchExpressions.orValue([])"
               f".size() == 0 && t.?matchFields.orValue([]).size() == 1 && "
               f"t.matchFields.all(r, {_PIN}))")
    return (
        f"{same} && ({old}.size() == 0 ? ({new}.size() == 0 || ({one_pin})) : "
        f"({new}.size() == {old}.size() && {exprs.format(new)} == {exprs.format(old)} "
        f"&& {fields.format(new)} == {fields.format(old)}))"
    )


def _images(obj: str, field: str) -> str:
    return f"(has({obj}.spec.{field}) ? {obj}.spec.{field}.map(c, c.image) : [])"


def pod_update_policy(namespace: str) -> list[Manifest]:
    """The ValidatingAdmissionPolicy and its binding (cluster-scoped)."""
    user = f"system:serviceaccount:{namespace}:{APP_NAME}"
    gates = "(has({o}.spec.schedulingGates) ? {o}.spec.schedulingGates.map(g, g.name) : [])"
    variables = [
        {"name": "old_gates", "expression": gates.format(o="oldObject")},
        {"name": "new_gates", "expression": gates.format(o="object")},
        {"name": "old_terms", "expression": _terms("oldObject")},
        {"name": "new_terms", "expression": _terms("object")},
        _map_variable("old_selector", "oldObject", "spec.nodeSelector"),
        _map_variable("new_selector", "object", "spec.nodeSelector"),
        _map_variable("old_labels", "oldObject", "metadata.labels"),
        _map_variable("new_labels", "object", "metadata.labels"),
        _map_variable("old_annotations", "oldObject", "metadata.annotations"),
        _map_variable("new_annotations", "object", "metadata.annotations"),
    ]
    validations = [
        {
            "expression": "variables.new_gates == variables.old_gates || variables.new_gates "
            f"== variables.old_gates.filter(n, n != '{GATE}')",
            "message": f"gangkeeper may only remove its own scheduling gate ({GATE})",
            "reason": "Forbidden",
        },
        {
            "expression": "variables.old_selector.all(k, k in variables.new_selector && "
            "variables.new_selector[k] == variables.old_selector[k]) && "
            "variables.new_selector.all(k, k in variables.old_selector || "
            f"k == '{PIN_LABEL}')",
            "message": f"gangkeeper may only add the {PIN_LABEL} node selector",
            "reason": "Forbidden",
        },
        {
            "expression": _affinity_pinned_only(),
            "message": "gangkeeper may only add its pin (matchFields metadata.name In "
            "[node]) to spec.affinity",
            "reason": "Forbidden",
        },
        {
            "expression": _only_own_keys_change("labels"),
            "message": f"gangkeeper may only change labels under {OWN_PREFIX}",
            "reason": "Forbidden",
        },
        {
            "expression": _only_own_keys_change("annotations", OTHER_ANNOTATIONS),
            "message": f"gangkeeper may only change annotations under {OWN_PREFIX} and "
            f"{' and '.join(OTHER_ANNOTATIONS)}",
            "reason": "Forbidden",
        },
        {
            "expression": f"{_images('object', 'containers')} == "
            f"{_images('oldObject', 'containers')} && "
            f"{_images('object', 'initContainers')} == {_images('oldObject', 'initContainers')}",
            "message": "gangkeeper may not change a container image",
            "reason": "Forbidden",
        },
        *(
            {
                "expression": _unchanged(path),
                "message": f"gangkeeper may not change {path}",
                "reason": "Forbidden",
            }
            for path in UNCHANGED
        ),
    ]
    policy: Manifest = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": metadata(POD_UPDATE_POLICY, None),
        "spec": {
            # A policy that cannot be evaluated refuses the write: it is a security bound.
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "matchConditions": [
                {"name": "by-gangkeeper", "expression": f"request.userInfo.username == '{user}'"}
            ],
            "variables": variables,
            "validations": validations,
        },
    }
    binding: Manifest = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": metadata(POD_UPDATE_POLICY, None),
        "spec": {"policyName": POD_UPDATE_POLICY, "validationActions": ["Deny"]},
    }
    return [policy, binding]
