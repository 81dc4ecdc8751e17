"""The objects that install gangkeeper in a cluster, rendered as plain data.

One module per concern: `objects` (metadata, labels, option types), `kinds` (the
workload kinds the recognisers validate), `rbac`, `webhooks` (rules, selectors, CEL),
`deployment`, `cert_manager`, `render` (all of them in apply order), `yaml_text` and
`helm`. The object names are in `gangkeeper.policies.names`.

Pure: builds dicts and text, reads no file and talks to no cluster.
"""

from __future__ import annotations

from .deployment import CERT_DIR, DEFAULT_IMAGE, RUN_AS
from .helm import CHART_FILE, helm_chart_files
from .objects import BACKENDS, CERT_MODES, CertMode, Manifest
from .rbac import rule_reason
from .render import render_manifests
from .webhooks import webhook_configurations
from .yaml_text import dump_yaml

__all__ = [
    "BACKENDS",
    "CERT_DIR",
    "CERT_MODES",
    "CHART_FILE",
    "DEFAULT_IMAGE",
    "RUN_AS",
    "CertMode",
    "Manifest",
    "dump_yaml",
    "helm_chart_files",
    "render_manifests",
    "rule_reason",
    "webhook_configurations",
]
