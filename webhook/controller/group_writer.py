"""Ensuring the group object a scheduler backend needs before a gang's gates go.

`GroupWriter.ensure(gang)` creates the PodGroup of the gang's backend (coscheduling,
volcano, or the native `scheduling.k8s.io` version the API server serves, discovered
once) and treats "already exists" as done: a previous leader may have made it.

May do API I/O (creates, discovery); what the object holds is
`gangkeeper.policies.release.groups`'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.observed_gangs import GangObservation
from gangkeeper.policies.release.groups import (
    COSCHEDULING,
    NATIVE_VERSIONS,
    VOLCANO,
    GroupResource,
    group_object,
    native_resource,
)

from ..kube.api import Api, ApiError, Conflict
from ..series import Count
from .writes import WRITE_QUERY

log = logging.getLogger(__name__)



class GroupWriter:
    """Creates group objects through `rest`; counts what it did through `count`."""

    def __init__(self, rest: Api, count: Count,
                 served_by_devices: Callable[[], frozenset[str]] = frozenset) -> None:
        self.rest = rest
        self._count = count
        #: The resources DeviceClasses serve by `extendedResourceName`, now: kept out
        #: of minResources (`groups.min_resources`).
        self._served_by_devices = served_by_devices
        self._native: GroupResource | None = None
        self._native_checked = False

    def _group_resource(self, backend: str) -> GroupResource | None:
        if backend == "coscheduling":
            return COSCHEDULING
        if backend == "volcano":
            return VOLCANO
        if not self._native_checked:
            try:
                group = self.rest.get("/apis/scheduling.k8s.io")
                served = {str(v.get("version")) for v in group.get("versions") or []}
                for version in NATIVE_VERSIONS:
                    if version not in served:
                        continue
                    resources = self.rest.get(f"/apis/scheduling.k8s.io/{version}")
                    if any(r.get("name") == "podgroups" for r in resources.get("resources") or []):
                        self._native = native_resource(version)
                        break
                self._native_checked = True
            except ApiError as err:
                log.warning("discovering scheduling.k8s.io: %s", err)
                return None
        return self._native

    def ensure(self, gang: GangObservation) -> bool:
        """Whether the gang's group object exists now (created, or found existing)."""
        resource = self._group_resource(gang.backend)
        if resource is None:
            log.warning(
                "gang %s/%s: backend %s needs a PodGroup API the cluster does not serve",
                gang.namespace, gang.name, gang.backend,
            )
            self._count(cat.GANG_GROUP_ERRORS, (("backend", gang.backend),))
            return False
        body = group_object(gang, resource, self._served_by_devices())
        path = f"/apis/{resource.api_version}/namespaces/{gang.namespace}/{resource.plural}"
        try:
            self.rest.request("POST", path, WRITE_QUERY, body=body)
            self._count(cat.GANG_GROUPS_CREATED, (("backend", gang.backend),))
        except Conflict:
            pass  # exists already (a previous leader made it)
        except ApiError as err:
            log.warning("creating %s for %s/%s: %s", path, gang.namespace, gang.name, err)
            self._count(cat.GANG_GROUP_ERRORS, (("backend", gang.backend),))
            return False
        return True

