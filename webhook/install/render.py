"""The Kubernetes manifests that install gangkeeper, rendered as plain dicts.

`render_manifests(...)` is the single source of `deploy/base` (committed, and checked by a
test to equal the renderer's output), of `gangkeeper manifests`, and of the out-of-cluster
registration the sandbox and local tests apply (`url` + `ca_bundle`). `dump_yaml(...)`
writes them as multi-document YAML with the RBAC justifications as comments.

Pure: builds data, reads no file and talks to no cluster. The workload kinds the
validating webhook covers come from the recognisers' `rules`, so adding a recogniser adds
its webhook rule here with no edit.

Failure policies (the README explains them to users):
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
"""

from __future__ import annotations

import base64
import importlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import yaml

from gangkeeper.policies.config import DEFAULT_GPU_RESOURCES, DEFAULT_SCHEDULER_NAMES
from gangkeeper.policies.decision import NEVER_NAMESPACES

CertMode = Literal["self", "cert-manager"]
Manifest = dict[str, Any]

DEFAULT_NAMESPACE = "gangkeeper-system"
DEFAULT_IMAGE = "ghcr.io/gangkeeper/gangkeeper:0.1.0"
NAME = "gangkeeper"
SERVICE_NAME = "gangkeeper"
#: Self-managed mode: gangkeeper keeps its CA and certificate here (`serve` uses
#: `<service>-tls`); cert-manager mode: the Certificate's Secret, mounted read-only.
SECRET_NAME = "gangkeeper-tls"
CERTIFICATE_NAME = "gangkeeper-serving"
ISSUER_NAME = "gangkeeper-selfsigned"
CONFIGMAP_NAME = "gangkeeper-config"
LEASE_NAME = "gangkeeper-controller"
MUTATING_NAME = "gangkeeper-mutating"
VALIDATING_NAME = "gangkeeper-validating"
POD_MUTATE = "pods.mutate.gangkeeper.io"
POD_VALIDATE = "pods.validate.gangkeeper.io"
WORKLOAD_VALIDATE = "workloads.validate.gangkeeper.io"
CONTAINER_PORT = 8443
CERT_DIR = "/var/run/gangkeeper/certs"
CONFIG_DIR = "/etc/gangkeeper"
#: Numeric, non-root; the Dockerfile creates the same UID.
RUN_AS = 65532
ENABLED_LABEL = "gangkeeper.io/enabled"
SKIP_LABEL = "gangkeeper.io/skip"
GANG_NAME_ANNOTATION = "gangkeeper.io/gang-name"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": NAME}
BACKENDS: tuple[str, ...] = tuple(DEFAULT_SCHEDULER_NAMES)
CERT_MODES: tuple[str, ...] = ("self", "cert-manager")

#: Label key prefixes (and exact keys) that mark a pod of a known training system, so the
#: pod webhooks see it even without a GPU request (a CPU-only worker of a GPU gang).
TRAINING_LABEL_PREFIXES: tuple[str, ...] = (
    "training.kubeflow.org/",
    "trainer.kubeflow.org/",
    "jobset.sigs.k8s.io/",
    "leaderworkerset.sigs.k8s.io/",
    "kueue.x-k8s.io/pod-group",
    "scheduling.x-k8s.io/pod-group",
    "volcano.sh/",
)
#: Annotations that make a pod a gang member by themselves.
TRAINING_ANNOTATIONS: tuple[str, ...] = (GANG_NAME_ANNOTATION, "scheduling.k8s.io/group-name")


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


# --- RBAC, each rule with its reason ---------------------------------------------------

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
    for group, _versions, resource in _recognised_resources():
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
        [MUTATING_NAME, VALIDATING_NAME],
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


# --- workload rules from the recognisers -----------------------------------------------


def _recognised_resources() -> list[tuple[str, tuple[str, ...], str]]:
    """(group, versions, plural) of every workload kind in `default_registry()`.

    Empty while the registry module does not exist (it is written separately); the
    webhook then validates pods only.
    """
    try:
        registry_module = importlib.import_module("gangkeeper.policies.recognizers.registry")
    except ImportError:
        return []
    return [
        (rule.group, tuple(rule.versions), rule.resource)
        for recognizer in registry_module.default_registry()
        for rule in getattr(recognizer, "rules", ())
    ]


def workload_rules() -> list[Manifest]:
    """Webhook rules for every workload kind a recogniser validates, grouped by API group."""
    by_group: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for group, versions, resource in _recognised_resources():
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


def training_marker_condition() -> str:
    """CEL: the pod carries a known training-system label or a gang annotation."""
    prefixes = " ||\n    ".join(f"k.startsWith({_cel_string(p)})" for p in TRAINING_LABEL_PREFIXES)
    annotations = " ||\n    ".join(
        f"{_cel_string(a)} in object.metadata.annotations" for a in TRAINING_ANNOTATIONS
    )
    return (
        f"(has(object.metadata.labels) && object.metadata.labels.exists(k,\n    {prefixes}))"
        f" ||\n(has(object.metadata.annotations) && (\n    {annotations}))"
    )


def pod_match_conditions() -> list[Manifest]:
    """Skip pods that are neither GPU pods nor marked as training pods, and non-CREATEs."""
    return [
        {"name": "create-only", "expression": "request.operation == 'CREATE'"},
        {
            "name": "gpu-or-training-pod",
            "expression": f"{gpu_request_condition()} ||\n{training_marker_condition()}\n",
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
        hook["matchConditions"] = pod_match_conditions()
    return hook


def webhook_configurations(
    namespace: str,
    *,
    url: str | None = None,
    ca_bundle: str | None = None,
    cert_mode: CertMode = "self",
) -> list[Manifest]:
    """The MutatingWebhookConfiguration and ValidatingWebhookConfiguration."""
    annotations: dict[str, str] = {}
    if cert_mode == "cert-manager" and url is None:
        annotations["cert-manager.io/inject-ca-from"] = f"{namespace}/{CERTIFICATE_NAME}"
    common = {"url": url, "ca_bundle": ca_bundle}
    mutating = _webhook(
        POD_MUTATE,
        "/mutate",
        namespace,
        [dict(_POD_RULE)],
        failure_policy="Fail",
        pod_conditions=True,
        **common,
    )
    mutating["reinvocationPolicy"] = "IfNeeded"
    validating = [
        _webhook(
            POD_VALIDATE,
            "/validate",
            namespace,
            [dict(_POD_RULE)],
            failure_policy="Ignore",
            pod_conditions=True,
            **common,
        )
    ]
    rules = workload_rules()
    if rules:
        validating.append(
            _webhook(
                WORKLOAD_VALIDATE,
                "/validate",
                namespace,
                rules,
                failure_policy="Ignore",
                pod_conditions=False,
                **common,
            )
        )
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": _metadata(MUTATING_NAME, None, annotations),
            "webhooks": [mutating],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": _metadata(VALIDATING_NAME, None, annotations),
            "webhooks": validating,
        },
    ]


# --- the in-cluster installation -------------------------------------------------------


def _metadata(
    name: str, namespace: str | None, annotations: Mapping[str, str] | None = None
) -> Manifest:
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(LABELS)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def _role(kind: str, name: str, namespace: str | None, rules: Iterable[RbacRule]) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": _metadata(name, namespace),
        "rules": [r.rule for r in rules],
    }


def _binding(
    kind: str, role_kind: str, name: str, namespace: str, bound_ns: str | None
) -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": _metadata(name, bound_ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
    }


def _rbac(namespace: str, cert_mode: CertMode) -> list[Manifest]:
    cluster_rules = [*CONTROLLER_RULES, *WEBHOOK_RULES, *owner_rules()]
    namespaced = list(NAMESPACED_RULES)
    if cert_mode == "self":
        cluster_rules += CABUNDLE_RULES
        namespaced += SECRET_RULES
    return [
        _role("ClusterRole", NAME, None, cluster_rules),
        _binding("ClusterRoleBinding", "ClusterRole", NAME, namespace, None),
        _role("Role", NAME, namespace, namespaced),
        _binding("RoleBinding", "Role", NAME, namespace, namespace),
    ]


def config_document(backend: str) -> str:
    """The config file the ConfigMap carries (read by `gangkeeper serve --config`)."""
    return yaml.safe_dump({"backend": backend}, sort_keys=False)


def _security_context() -> Manifest:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _probe(path: str, period: int, failures: int) -> Manifest:
    return {
        "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
        "periodSeconds": period,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }


def _deployment(namespace: str, cert_mode: CertMode, image: str) -> Manifest:
    selector = {"app.kubernetes.io/name": NAME}
    cert_volume: Manifest
    if cert_mode == "self":
        # Written by the process from the shared Secret; memory-backed, never on disk.
        cert_volume = {"name": "certs", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}
    else:
        cert_volume = {"name": "certs", "secret": {"secretName": SECRET_NAME}}
    env = [
        # `serve` reads its namespace (Lease, Secret) and its controller identity from these.
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    container: Manifest = {
        "name": NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            "--config",
            f"{CONFIG_DIR}/config.yaml",
            "--cert-dir",
            CERT_DIR,
            "--cert-mode",
            "self-managed" if cert_mode == "self" else "cert-manager",
            "--service",
            SERVICE_NAME,
            "--host",
            "0.0.0.0",
            "--port",
            str(CONTAINER_PORT),
        ],
        "env": env,
        "ports": [{"name": "https", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "startupProbe": _probe("/healthz", 2, 30),
        "livenessProbe": _probe("/healthz", 10, 3),
        "readinessProbe": _probe("/readyz", 5, 2),
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        "securityContext": _security_context(),
        "volumeMounts": [
            {"name": "certs", "mountPath": CERT_DIR, "readOnly": cert_mode != "self"},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(NAME, namespace),
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": selector},
            "strategy": {
                "type": "RollingUpdate",
                # Never below one ready replica: the mutating webhook fails closed.
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": True,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS,
                        "fsGroup": RUN_AS,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "affinity": {
                        "podAntiAffinity": {
                            # Preferred, not required: a one-node cluster still runs both.
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {"matchLabels": selector},
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [container],
                    "volumes": [
                        cert_volume,
                        {"name": "config", "configMap": {"name": CONFIGMAP_NAME}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                    ],
                },
            },
        },
    }


def _cert_manager(namespace: str) -> list[Manifest]:
    dns = [SERVICE_NAME, f"{SERVICE_NAME}.{namespace}", f"{SERVICE_NAME}.{namespace}.svc"]
    return [
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": _metadata(ISSUER_NAME, namespace),
            "spec": {"selfSigned": {}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": _metadata(CERTIFICATE_NAME, namespace),
            "spec": {
                "secretName": SECRET_NAME,
                "dnsNames": dns,
                "duration": "2160h",
                "renewBefore": "720h",
                "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                "issuerRef": {"kind": "Issuer", "name": ISSUER_NAME},
            },
        },
    ]


def render_manifests(
    namespace: str = DEFAULT_NAMESPACE,
    backend: str = "gate",
    url: str | None = None,
    ca_bundle: str | bytes | None = None,
    cert_mode: CertMode = "self",
    *,
    image: str = DEFAULT_IMAGE,
) -> list[Manifest]:
    """Every object of an installation, in apply order.

    With `url` (and `ca_bundle`, the PEM of the CA) only the two webhook configurations,
    pointing at `url/mutate` and `url/validate`: how an out-of-cluster server is
    registered. In cluster, `cert_mode="self"` leaves caBundle empty for gangkeeper to
    inject; `"cert-manager"` adds an Issuer and a Certificate and lets cert-manager's CA
    injector fill it.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if cert_mode not in CERT_MODES:
        raise ValueError(f"cert_mode must be one of {', '.join(CERT_MODES)}, got {cert_mode!r}")
    if not namespace:
        raise ValueError("namespace must not be empty")
    encoded: str | None = None
    if ca_bundle is not None:
        pem = ca_bundle.encode() if isinstance(ca_bundle, str) else ca_bundle
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise ValueError("ca_bundle is not a PEM certificate bundle")
        encoded = base64.b64encode(pem).decode()
    if url is not None:
        if not url.startswith("https://"):
            raise ValueError(
                f"url must start with https:// (the API server only calls HTTPS), got {url!r}"
            )
        return webhook_configurations(namespace, url=url, ca_bundle=encoded)

    objects: list[Manifest] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {
                    **LABELS,
                    # Pod Security: gangkeeper's own pods run under `restricted`.
                    "pod-security.kubernetes.io/enforce": "restricted",
                },
            },
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _metadata(NAME, namespace)},
        *_rbac(namespace, cert_mode),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _metadata(CONFIGMAP_NAME, namespace),
            "data": {"config.yaml": config_document(backend)},
        },
    ]
    if cert_mode == "self":
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _metadata(SECRET_NAME, namespace),
                # Filled by gangkeeper; shipped empty so RBAC needs no `create` on Secrets.
                "type": "Opaque",
            }
        )
    else:
        objects += _cert_manager(namespace)
    objects += [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _metadata(SERVICE_NAME, namespace),
            "spec": {
                "selector": {"app.kubernetes.io/name": NAME},
                "ports": [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}],
            },
        },
        _deployment(namespace, cert_mode, image),
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": _metadata(NAME, namespace),
            "spec": {
                "minAvailable": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            },
        },
        *webhook_configurations(namespace, ca_bundle=encoded, cert_mode=cert_mode),
    ]
    return objects


# --- YAML ------------------------------------------------------------------------------

_HEADER = "# Generated by `gangkeeper manifests`; edit webhook/manifests.py, not this file.\n"


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (CEL expressions, the config file) as literal blocks; no
    anchors/aliases (shared dicts are written out in full, as kubectl users expect)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def _dump(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)


def _indent(text: str, prefix: str) -> str:
    return "".join(prefix + line if line.strip() else line for line in text.splitlines(True))


def dump_document(obj: Manifest) -> str:
    """One object as YAML; RBAC rules are preceded by a comment saying why they exist."""
    if obj.get("kind") not in ("ClusterRole", "Role") or "rules" not in obj:
        return _dump(obj)
    head = _dump({k: v for k, v in obj.items() if k != "rules"})
    parts = [head, "rules:\n"]
    for rule in obj["rules"]:
        why = rule_reason(rule)
        if why:
            parts.append(_indent(_wrap_comment(why), ""))
        parts.append(_dump([rule]))
    return "".join(parts)


def _wrap_comment(text: str, width: int = 96) -> str:
    lines: list[str] = []
    line = "#"
    for word in text.split():
        if len(line) + 1 + len(word) > width and line != "#":
            lines.append(line)
            line = "#"
        line += " " + word
    lines.append(line)
    return "\n".join(lines) + "\n"


def dump_yaml(objects: Iterable[Manifest]) -> str:
    """Multi-document YAML with a header saying where it comes from."""
    return _HEADER + "".join("---\n" + dump_document(obj) for obj in objects)


# --- Helm chart --------------------------------------------------------------------------

HELM_VALUES = """\
# gangkeeper Helm chart values. Install into the namespace gangkeeper should run in:
#   helm install gangkeeper deploy/helm/gangkeeper -n gangkeeper-system --create-namespace
#   kubectl label namespace gangkeeper-system pod-security.kubernetes.io/enforce=restricted
# Gang scheduling backend: gate | coscheduling | volcano | native
backend: gate
# self: gangkeeper issues, renews and injects its certificates; cert-manager: a
# Certificate is created and cert-manager injects the CA (cert-manager must be installed).
certMode: self
image: {image}
"""


def _helm_text(obj: Manifest, namespace: str, image: str) -> str:
    """One object as a Helm template: namespace, image and backend become values."""
    text = dump_document(obj).replace(namespace, "{{ .Release.Namespace }}")
    text = text.replace(f"image: {image}", "image: {{ .Values.image }}")
    if obj["kind"] == "ConfigMap":
        text = text.replace("backend: gate", "backend: {{ .Values.backend }}")
    return text


def helm_chart_files(image: str = DEFAULT_IMAGE) -> dict[str, str]:
    """The chart `deploy/helm/gangkeeper`, as {relative path: content}.

    Generated from the same renderer: every object of both certificate modes, the ones
    that differ wrapped in `{{- if eq .Values.certMode ... }}`. The Namespace is left out
    (Helm installs into `--namespace`, created with `--create-namespace`).
    """
    namespace = DEFAULT_NAMESPACE
    modes: dict[str, dict[tuple[str, str], str]] = {}
    order: list[tuple[str, str]] = []
    for mode in CERT_MODES:
        rendered = {}
        cert_mode: CertMode = "self" if mode == "self" else "cert-manager"
        for obj in render_manifests(namespace, "gate", cert_mode=cert_mode, image=image):
            if obj["kind"] == "Namespace":
                continue
            key = (obj["kind"], obj["metadata"]["name"])
            rendered[key] = _helm_text(obj, namespace, image)
            if key not in order:
                order.append(key)
        modes[mode] = rendered
    parts = []
    for key in order:
        texts = {mode: modes[mode].get(key) for mode in CERT_MODES}
        if len(set(texts.values())) == 1:
            parts.append("---\n" + (texts["self"] or ""))
            continue
        for mode, text in texts.items():
            if text is not None:
                parts.append(
                    f'{{{{- if eq .Values.certMode "{mode}" }}}}\n---\n{text}{{{{- end }}}}\n'
                )
    version = image.rsplit(":", 1)[-1]
    chart = (
        "apiVersion: v2\n"
        "name: gangkeeper\n"
        "description: All-or-nothing admission for distributed training on Kubernetes\n"
        "type: application\n"
        f"version: {version}\n"
        f'appVersion: "{version}"\n'
    )
    return {
        "Chart.yaml": chart,
        "values.yaml": HELM_VALUES.format(image=image),
        "templates/gangkeeper.yaml": _HEADER + "".join(parts),
    }
