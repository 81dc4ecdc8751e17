"""What every install object shares: its metadata and labels, and the option types.

Pure: builds dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from gangkeeper.policies.names import APP_NAME
from gangkeeper.policies.settings.config import DEFAULT_SCHEDULER_NAMES

CertMode = Literal["self", "cert-manager"]
Manifest = dict[str, Any]

LABELS = {"app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/part-of": APP_NAME}
BACKENDS: tuple[str, ...] = tuple(DEFAULT_SCHEDULER_NAMES)
CERT_MODES: tuple[str, ...] = ("self", "cert-manager")


def metadata(
    name: str, namespace: str | None, annotations: Mapping[str, str] | None = None
) -> Manifest:
    meta: Manifest = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(LABELS)
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta
