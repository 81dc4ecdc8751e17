"""The Helm chart `deploy/helm/gangkeeper`, generated from the same renderer. Pure."""

from __future__ import annotations

from gangkeeper.policies.names import DEFAULT_NAMESPACE

from .deployment import DEFAULT_IMAGE
from .objects import CERT_MODES, CertMode, Manifest
from .render import render_manifests
from .yaml_text import HEADER, dump_document

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
        "templates/gangkeeper.yaml": HEADER + "".join(parts),
    }
