"""Reading Events in end-to-end tests as plain dicts.

The kubernetes client's `EventsV1Event` model refuses an Event without `eventTime`,
and Events written through core/v1 (kube-controller-manager's, kube-scheduler's)
come back from events.k8s.io/v1 without one: one such Event in the namespace made
every typed list raise, and a test polling for gangkeeper's own Events timed out.
The raw JSON carries every Event as the API server serves it.
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client


def events_in(
    api: client.ApiClient, namespace: str, reason: str | None = None
) -> list[dict[str, Any]]:
    """The namespace's events.k8s.io/v1 Events (with `reason`, only those)."""
    response = client.EventsV1Api(api).list_namespaced_event(namespace, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return [e for e in items if reason is None or e.get("reason") == reason]
