"""The patch that lifts gangkeeper's gate and pins the pod to its node, in one write.

Gated pods may gain scheduling directives (KEP-3838, stable since Kubernetes 1.30):
nodeSelector keys may be added, none changed or removed. `pin_patch` therefore adds
`kubernetes.io/hostname` only when the user has not set it (a user's own hostname pin
is respected by the assigner, which only picks that node), and `test`s the gates it
read, so a pod changed meanwhile fails the patch instead of losing another system's
gate. Without a node it is the plain gate removal. `pinned_hostname` reads a pin back.

Pure: values in, a JSON-patch list out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..names import GATE, PIN_LABEL, RELEASED_AT_ANNOTATION

#: The node label a pin selects on (`names.PIN_LABEL`).
HOSTNAME_LABEL = PIN_LABEL


def pointer_token(key: str) -> str:
    """A map key as a JSON-pointer segment (RFC 6901); every patch of labels,
    annotations or nodeSelector keys escapes with this one."""
    return key.replace("~", "~0").replace("/", "~1")


def pin_patch(
    gates: Sequence[str],
    node_selector: Mapping[str, str] | None,
    hostname: str | None,
    gate: str = GATE,
    *,
    released_at: str | None = None,
) -> list[dict[str, Any]]:
    """JSON patch lifting only `gate` and, given a hostname, pinning the pod there.

    `node_selector` is the pod's nodeSelector as read (None when absent): the patch
    `test`s it, so the pin is never added over a selector changed meanwhile. With
    `released_at` (RFC 3339) the pod's annotations (gang pods always have some) get
    `names.RELEASED_AT_ANNOTATION`, which the watchdog reads.
    """
    current = [{"name": g} for g in gates]
    remaining = [{"name": g} for g in gates if g != gate]
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/spec/schedulingGates", "value": current},
    ]
    if hostname and HOSTNAME_LABEL not in (node_selector or {}):
        if node_selector is None:
            ops.append({"op": "add", "path": "/spec/nodeSelector",
                        "value": {HOSTNAME_LABEL: hostname}})
        else:
            ops.append({"op": "test", "path": "/spec/nodeSelector", "value": dict(node_selector)})
            ops.append({"op": "add", "path": f"/spec/nodeSelector/{pointer_token(HOSTNAME_LABEL)}",
                        "value": hostname})
    if released_at:
        path = f"/metadata/annotations/{pointer_token(RELEASED_AT_ANNOTATION)}"
        ops.append({"op": "add", "path": path, "value": released_at})
    ops.append({"op": "replace", "path": "/spec/schedulingGates", "value": remaining})
    return ops


def pinned_hostname(spec: Mapping[str, Any]) -> str:
    """The hostname label value a pod spec (a dict, as the API server returns it) is
    pinned to by `pin_patch`; "" when it is not pinned."""
    selector = spec.get("nodeSelector")
    return str(selector.get(HOSTNAME_LABEL, "")) if isinstance(selector, Mapping) else ""
