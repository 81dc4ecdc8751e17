"""The mutating and validating webhook configurations: rules, selectors, CEL conditions.

Failure policies (docs/install.md explains them to users):
- mutating `Fail`: a gang must be keyed consistently. With `Ignore`, pods created while
  gangkeeper is down would miss the gate and gang labels, run piecemeal, and leave their
  gated siblings waiting for members that are never counted. Pod creation in opted-in
  namespaces for GPU/training pods therefore fails while no replica is ready; the owning
  controllers (Job, JobSet, ...) retry with backoff and succeed once a replica is back.
  Two replicas, anti-affinity and a PodDisruptionBudget keep that window short, and the
  webhook never matches kube-system or gangkeeper's own namespace, so gangkeeper can
  always restart itself.
- validating `Ignore`: validation only rejects gangs that could never run; skipping it
  while gangkeeper is down admits such a gang, which then waits gated (harmless), instead
  of blocking every workload create/update in opted-in namespaces.

Pure: builds dicts and CEL text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gangkeeper.policies.admission.decision import NEVER_NAMESPACES
from gangkeeper.policies.names import (
    CERTIFICATE_NAME,
    ENABLED_LABEL,
    GANG_NAME_ANNOTATION,
    MUTATING_WEBHOOK_CONFIGURATION,
    POD_MUTATE_WEBHOOK,
    POD_VALIDATE_WEBHOOK,
    SERVICE_NAME,
    SKIP_LABEL,
    VALIDATING_WEBHOOK_CONFIGURATION,
    VOLCANO_GROUP_ANNOTATION,
    WORKLOAD_VALIDATE_WEBHOOK,
)
from gangkeeper.policies.settings.config import DEFAULT_GPU_RESOURCES

from .kinds import marking_labels, recognised_resources
from .objects import CertMode, Manifest, metadata

#: The order the match condition listed the prefixes in before the recognisers declared
#: them, kept so that the rendered CEL, and with it deploy/, stays as it was. Order only:
#: which prefixes there are is the recognisers' (`marking_labels`), and one not named
#: here, a new kind's, comes after these.
_RENDERED_ORDER = (
    "training.kubeflow.org/",
    "trainer.kubeflow.org/",
    "jobset.sigs.k8s.io/",
    "leaderworkerset.sigs.k8s.io/",
    "kueue.x-k8s.io/pod-group",
    "scheduling.x-k8s.io/pod-group",
    "volcano.sh/",
)


def training_label_prefixes() -> tuple[str, ...]:
    """Label key prefixes (and exact keys) that mark a pod of a known training system, so
    the pod webhooks see it even without a GPU request (a CPU-only worker of a GPU gang):
    those the recognisers' kinds put on their pods (`base.MarksPods`)."""
    rank = {prefix: i for i, prefix in enumerate(_RENDERED_ORDER)}
    return tuple(sorted(marking_labels(), key=lambda p: rank.get(p, len(rank))))


#: Annotations that make a pod a gang member by themselves.
TRAINING_ANNOTATIONS: tuple[str, ...] = (GANG_NAME_ANNOTATION, VOLCANO_GROUP_ANNOTATION)


def workload_rules() -> list[Manifest]:
    """Webhook rules for every workload kind a recogniser validates, grouped by API group."""
    by_group: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for group, versions, resource in recognised_resources():
        resources = by_group.setdefault((group, versions), [])
        if resource not in resources:
            resources.append(resource)
    return [
        {
            "apiGroups": [group],
            "apiVersions": list(versions),
            "operations": ["CREATE", "UPDATE"],
            "resources": sorted(resources),
            "scope": "Namespaced",
        }
        for (group, versions), resources in sorted(by_group.items())
    ]


# --- CEL match conditions --------------------------------------------------------------


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _resource_test(var: str, patterns: Iterable[str]) -> str:
    """CEL: resource name `var` is a GPU resource (config globs: exact or prefix*)."""
    tests = []
    for pattern in patterns:
        cut = min((pattern.find(c) for c in "*?[" if c in pattern), default=-1)
        if cut >= 0:
            tests.append(f"{var}.startsWith({_cel_string(pattern[:cut])})")
        else:
            tests.append(f"{var} == {_cel_string(pattern)}")
    return " || ".join(tests)


#: The test `gpu_request_condition` renders for the default `gpuResources`. The Helm
#: chart replaces it with the one built from its values' `config.gpuResources` (the
#: same rule in the template language: `gangkeeper.gpuResourceTest`).
DEFAULT_GPU_RESOURCE_TEST = _resource_test("r", DEFAULT_GPU_RESOURCES)


def gpu_request_condition(gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> str:
    """CEL: some container or init container has a GPU resource in its limits.

    Limits alone suffice: GPUs are extended resources, which the API server refuses
    to overcommit. A container that names one in requests must name it in limits with
    the same value, and one given only as a limit gets its request defaulted from it.
    Every optional field is guarded with has(): an error in a match condition counts
    as a webhook failure, which `Fail` would turn into a denied pod.
    """
    test = _resource_test("r", gpu_resources)
    return (
        "(object.spec.containers + (has(object.spec.initContainers) ? "
        "object.spec.initContainers : [])).exists(c,\n"
        "  has(c.resources) && has(c.resources.limits) &&\n"
        f"  c.resources.limits.exists(r, {test}))"
    )


def resource_claim_condition() -> str:
    """CEL: the pod asks for devices through Dynamic Resource Allocation.

    With DRA (resource.k8s.io/v1) a pod's GPUs are named in `spec.resourceClaims`
    (a ResourceClaimTemplate or a shared ResourceClaim), not in any container's
    limits, so the GPU test above never sees them. Guarded with has() like it.
    """
    return "(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0)"


def training_marker_condition() -> str:
    """CEL: the pod carries a known training-system label or a gang annotation."""
    prefixes = " ||\n    ".join(
        f"k.startsWith({_cel_string(p)})" for p in training_label_prefixes()
    )
    annotations = " ||\n    ".join(
        f"{_cel_string(a)} in object.metadata.annotations" for a in TRAINING_ANNOTATIONS
    )
    return (
        f"(has(object.metadata.labels) && object.metadata.labels.exists(k,\n    {prefixes}))"
        f" ||\n(has(object.metadata.annotations) && (\n    {annotations}))"
    )


def pod_match_conditions(
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
) -> list[Manifest]:
    """Skip pods that are neither GPU pods (by limits or by resource claims) nor marked
    as training pods, and non-CREATEs.

    `gpu_resources` are the config's `gpuResources`: a pod asking only for an
    accelerator the default list does not name (google.com/tpu) must still reach
    gangkeeper when the config counts it as a GPU.
    """
    gpu = gpu_request_condition(gpu_resources)
    return [
        {"name": "create-only", "expression": "request.operation == 'CREATE'"},
        {
            "name": "gpu-or-training-pod",
            "expression": (
                f"{gpu} ||\n{resource_claim_condition()} ||\n{training_marker_condition()}\n"
            ),
        },
    ]


# --- webhook configurations ------------------------------------------------------------


def _namespace_selector(namespace: str) -> Manifest:
    return {
        "matchLabels": {ENABLED_LABEL: "true"},
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": sorted(NEVER_NAMESPACES | {namespace}),
            }
        ],
    }


def _object_selector() -> Manifest:
    return {"matchExpressions": [{"key": SKIP_LABEL, "operator": "NotIn", "values": ["true"]}]}


def _client_config(path: str, namespace: str, url: str | None, ca_bundle: str | None) -> Manifest:
    config: Manifest
    if url is not None:
        config = {"url": url.rstrip("/") + path}
    else:
        config = {
            "service": {"name": SERVICE_NAME, "namespace": namespace, "path": path, "port": 443}
        }
    if ca_bundle is not None:
        config["caBundle"] = ca_bundle
    return config


_POD_RULE: Manifest = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE"],
    "resources": ["pods"],
    "scope": "Namespaced",
}


def _webhook(
    name: str,
    path: str,
    namespace: str,
    rules: list[Manifest],
    *,
    failure_policy: str,
    url: str | None,
    ca_bundle: str | None,
    pod_conditions: bool,
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
) -> Manifest:
    hook: Manifest = {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": _client_config(path, namespace, url, ca_bundle),
        "failurePolicy": failure_policy,
        "matchPolicy": "Equivalent",
        "namespaceSelector": _namespace_selector(namespace),
        "objectSelector": _object_selector(),
        "rules": rules,
        "sideEffects": "None",
        "timeoutSeconds": 5,
    }
    if pod_conditions:
        hook["matchConditions"] = pod_match_conditions(gpu_resources)
    return hook


def webhook_configurations(
    namespace: str,
    *,
    url: str | None = None,
    ca_bundle: str | None = None,
    cert_mode: CertMode = "self",
    gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
) -> list[Manifest]:
    """The MutatingWebhookConfiguration and ValidatingWebhookConfiguration; the pod
    webhooks match pods asking for any of `gpu_resources` (the config's patterns)."""
    annotations: dict[str, str] = {}
    if cert_mode == "cert-manager" and url is None:
        annotations["cert-manager.io/inject-ca-from"] = f"{namespace}/{CERTIFICATE_NAME}"
    mutating = _webhook(
        POD_MUTATE_WEBHOOK,
        "/mutate",
        namespace,
        [dict(_POD_RULE)],
        failure_policy="Fail",
        pod_conditions=True,
        gpu_resources=gpu_resources,
        url=url,
        ca_bundle=ca_bundle,
    )
    mutating["reinvocationPolicy"] = "IfNeeded"
    validating = [
        _webhook(
            POD_VALIDATE_WEBHOOK,
            "/validate",
            namespace,
            [dict(_POD_RULE)],
            failure_policy="Ignore",
            pod_conditions=True,
            gpu_resources=gpu_resources,
            url=url,
        ca_bundle=ca_bundle,
        )
    ]
    rules = workload_rules()
    if rules:
        validating.append(
            _webhook(
                WORKLOAD_VALIDATE_WEBHOOK,
                "/validate",
                namespace,
                rules,
                failure_policy="Ignore",
                pod_conditions=False,
                url=url,
        ca_bundle=ca_bundle,
            )
        )
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": metadata(MUTATING_WEBHOOK_CONFIGURATION, None, annotations),
            "webhooks": [mutating],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": metadata(VALIDATING_WEBHOOK_CONFIGURATION, None, annotations),
            "webhooks": validating,
        },
    ]
