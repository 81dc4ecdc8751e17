"""The autoscaling keys of gangkeeper's config, parsed into a frozen `Autoscaling`.

    autoscaling: placeholders        # placeholders (default) | provisioningrequest | off
    namespaceAutoscaling: {lab: off} # per-namespace override
    clusterAutoscales: false         # true: any pool may grow, declared or not
    provisioningTimeoutSeconds: 600  # placeholders not all bound by then: removed
    provisioningRetrySeconds: 60     # first wait after a timeout (doubles, at most 16x)
    placeholders: {image: registry.k8s.io/pause:3.10, priorityClassName: gangkeeper-placeholder}
    provisioningRequest:             # autoscaling: provisioningrequest
      className: best-effort-atomic-scale-up.autoscaling.x-k8s.io  # or check-capacity...
      retryLimit: 3                  # Failed/BookingExpired asks retried (Kueue's default)

`provisioningrequest` asks cluster-autoscaler through its ProvisioningRequest API
(`autoscaling.x-k8s.io/v1`) where the cluster serves it, and falls back to
placeholders where it does not.

Pure: no I/O. Bad values raise InvalidConfig naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from ..errors import InvalidConfig
from ..names import PLACEHOLDER_PRIORITY_CLASS
from .checks import count, flag, given, section, string, switch

AutoscalingMode = Literal["placeholders", "provisioningrequest", "off"]
_MODES: tuple[str, ...] = get_args(AutoscalingMode)

#: The pause image the placeholders run (they never do anything but hold room).
DEFAULT_PLACEHOLDER_IMAGE = "registry.k8s.io/pause:3.10"
#: Retries wait `retry_seconds * 2**(attempt-1)`, at most this many times the first wait.
MAX_BACKOFF_FACTOR = 16
#: cluster-autoscaler's provisioning class (its API's ProvisioningClass* constants) that
#: scales up for the whole request or not at all.
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: Failed or expired ProvisioningRequests retried before giving up (Kueue's default
#: backoffLimitCount).
DEFAULT_RETRY_LIMIT = 3

#: The top-level keys this module reads (settings/config.py merges them into its known keys).
KEYS = frozenset(
    {
        "autoscaling",
        "namespaceAutoscaling",
        "clusterAutoscales",
        "provisioningTimeoutSeconds",
        "provisioningRetrySeconds",
        "placeholders",
        "provisioningRequest",
    }
)
_PLACEHOLDER_KEYS = frozenset({"image", "priorityClassName"})
_REQUEST_KEYS = frozenset({"className", "retryLimit"})


@dataclass(frozen=True)
class Autoscaling:
    """How the controller asks autoscalers for the nodes of gangs (`gate` backend)."""

    mode: AutoscalingMode = "placeholders"
    namespace_modes: Mapping[str, AutoscalingMode] = field(default_factory=dict)
    #: Every pool may grow (the cluster autoscales), not only the declared `pools`.
    cluster_autoscales: bool = False
    provisioning_timeout_seconds: int = 600
    retry_seconds: int = 60
    image: str = DEFAULT_PLACEHOLDER_IMAGE
    priority_class: str = PLACEHOLDER_PRIORITY_CLASS
    #: `provisioningClassName` of the ProvisioningRequests (`provisioningrequest` mode).
    provisioning_class: str = BEST_EFFORT_ATOMIC
    #: Asks retried after Failed or BookingExpired before the gang gives up.
    retry_limit: int = DEFAULT_RETRY_LIMIT

    def mode_for(self, namespace: str) -> AutoscalingMode:
        return self.namespace_modes.get(namespace, self.mode)

    @property
    def uses_requests(self) -> bool:
        """Some namespace asks through ProvisioningRequests (their RBAC is needed)."""
        return "provisioningrequest" in (self.mode, *self.namespace_modes.values())

    def backoff_seconds(self, attempt: int) -> int:
        """How long to wait before asking again after `attempt` timed-out asks."""
        factor: int = min(2 ** max(0, attempt - 1), MAX_BACKOFF_FACTOR)
        return self.retry_seconds * factor


def _mode(key: str, value: object) -> AutoscalingMode:
    return cast(AutoscalingMode, switch(key, value, _MODES))


def load_autoscaling(data: Mapping[str, Any]) -> Autoscaling:
    """The autoscaling settings from the whole (already checked to be a mapping) config."""
    defaults = Autoscaling()
    namespaces = given(data, "namespaceAutoscaling", {})
    if not isinstance(namespaces, Mapping):
        raise InvalidConfig("namespaceAutoscaling", "must be a mapping of namespace to mode")
    placeholders = section(data, "placeholders", _PLACEHOLDER_KEYS)
    requests = section(data, "provisioningRequest", _REQUEST_KEYS)
    retry_limit = count(
        "provisioningRequest.retryLimit", given(requests, "retryLimit", defaults.retry_limit)
    )
    cluster_autoscales = flag("clusterAutoscales", given(data, "clusterAutoscales", False))
    return Autoscaling(
        mode=_mode("autoscaling", given(data, "autoscaling", defaults.mode)),
        namespace_modes={
            string("namespaceAutoscaling", ns): _mode(f"namespaceAutoscaling.{ns}", mode)
            for ns, mode in namespaces.items()
        },
        cluster_autoscales=cluster_autoscales,
        provisioning_timeout_seconds=count(
            "provisioningTimeoutSeconds",
            given(data, "provisioningTimeoutSeconds", defaults.provisioning_timeout_seconds),
            1,
            what="whole number of seconds",
        ),
        retry_seconds=count(
            "provisioningRetrySeconds",
            given(data, "provisioningRetrySeconds", defaults.retry_seconds),
            1,
            what="whole number of seconds",
        ),
        image=string("placeholders.image", given(placeholders, "image", defaults.image)),
        priority_class=string(
            "placeholders.priorityClassName",
            given(placeholders, "priorityClassName", defaults.priority_class),
        ),
        provisioning_class=string(
            "provisioningRequest.className",
            given(requests, "className", defaults.provisioning_class),
        ),
        retry_limit=retry_limit,
    )
