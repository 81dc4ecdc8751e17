"""gangkeeper's policy core: which pods form a gang, could it ever run, how to mark it.

Pure computation only: plain dicts (Kubernetes objects as the API server sends them)
in, frozen dataclasses out. Nothing in this package performs I/O, talks to the API
server, opens files or sockets, or imports `kubernetes`, `fastapi`, `uvicorn`,
`httpx`, `gangkeeper.webhook` or `gangkeeper.certs` (import-linter checks it). The
webhook supplies a `Capacity` fed by its watches and an `OwnerLookup` answering from
its caches; `gangkeeper check` supplies both from files.

The two calls the webhook and `gangkeeper check` make are `decide_pod` and
`validate_object`; everything else here is what they are made of, exported for the
controller, the CLI and tests. Everything public is listed in `__all__` (a test keeps
the list complete).
"""

from __future__ import annotations

from .admission.decision import ObjectDecision, PodDecision, decide_pod, validate_object
from .admission.mutation import (
    MutationPlan,
    group_name,
    label_value,
    plan_pod,
)
from .cluster.capacity import Capacity
from .cluster.node_shapes import Bin, NodeShape
from .eligibility import node_eligible, tolerates
from .errors import GangkeeperError, InvalidConfig, InvalidObject, PolicyError
from .fit.feasibility import check_gang, fits_now
from .model import (
    Backend,
    Gang,
    KubeObject,
    NodeSelectorTerm,
    OwnerLookup,
    Placement,
    PodMembership,
    PodsLookup,
    Requirement,
    Role,
    Source,
    Taint,
    Toleration,
    Verdict,
)
from .names import GANG_LABEL, GATE, ROLE_LABEL
from .podspec import placement_of, pod_demand
from .quantity import gpu_count, parse_quantity
from .recognizers.base import Recognizer, Registry, ResourceRule
from .recognizers.registry import default_registry, recognize_object, recognize_pod
from .settings.config import Config, NodePool, load_config

__all__ = [
    "GANG_LABEL",
    "GATE",
    "ROLE_LABEL",
    "Backend",
    "Bin",
    "Capacity",
    "Config",
    "Gang",
    "GangkeeperError",
    "InvalidConfig",
    "InvalidObject",
    "KubeObject",
    "MutationPlan",
    "NodePool",
    "NodeSelectorTerm",
    "NodeShape",
    "ObjectDecision",
    "OwnerLookup",
    "Placement",
    "PodDecision",
    "PodMembership",
    "PodsLookup",
    "PolicyError",
    "Recognizer",
    "Registry",
    "Requirement",
    "ResourceRule",
    "Role",
    "Source",
    "Taint",
    "Toleration",
    "Verdict",
    "check_gang",
    "decide_pod",
    "default_registry",
    "fits_now",
    "gpu_count",
    "group_name",
    "label_value",
    "load_config",
    "node_eligible",
    "parse_quantity",
    "placement_of",
    "plan_pod",
    "pod_demand",
    "recognize_object",
    "recognize_pod",
    "tolerates",
    "validate_object",
]
