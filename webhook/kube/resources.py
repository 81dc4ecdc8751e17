"""API resources by group, version and plural, and where they live in the API.

Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    """An API resource that is listed and watched (or read one object at a time)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def _prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def path(self) -> str:
        """The collection across all namespaces (what an informer lists and watches)."""
        return f"{self._prefix}/{self.plural}"

    def object_path(self, namespace: str, name: str) -> str:
        where = f"/namespaces/{namespace}" if self.namespaced else ""
        return f"{self._prefix}{where}/{self.plural}/{name}"

    @property
    def label(self) -> str:
        """A short unique name for logs and metrics: `jobs.v1.batch`, `pods`."""
        return f"{self.plural}.{self.version}.{self.group}" if self.group else self.plural


NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
PODS = Resource("", "v1", "pods", "Pod")
BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
