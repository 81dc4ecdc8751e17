"""What a Pod dict uses of its node, as `Capacity` counts it: its uid, the node it is
bound to and its effective GPU demand, or no node at all when it is unbound or
finished (Succeeded/Failed: a finished pod frees its GPUs).

Pure: reads one Pod dict; raises `InvalidObject` naming the field when it is malformed.
"""

from __future__ import annotations

from ..model import KubeObject
from ..podspec import as_mapping, as_str, pod_demand
from ..settings.config import Config


def bound_use(pod: KubeObject, config: Config) -> tuple[str, str, dict[str, int]]:
    """(uid, node, GPU demand); node "" and demand {} when the pod holds no GPUs now."""
    meta = as_mapping(pod.get("metadata"), "Pod.metadata", required=True)
    uid = as_str(meta.get("uid"), "Pod.metadata.uid")
    spec = as_mapping(pod.get("spec"), "Pod.spec", required=True)
    node_name = as_str(spec.get("nodeName"), "Pod.spec.nodeName", default="")
    status = as_mapping(pod.get("status"), "Pod.status")
    if not node_name or status.get("phase") in ("Succeeded", "Failed"):
        return uid, "", {}
    return uid, node_name, dict(pod_demand(spec, config, "Pod.spec"))
