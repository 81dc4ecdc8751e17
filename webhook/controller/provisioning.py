"""The ProvisioningRequest writes: PodTemplates, requests, deletions and Events.

The plan (`policies.autoscaling.provisioning`, through `release.plan`) says which
request each gang that asks through cluster-autoscaler's ProvisioningRequest API should
have, and `policies.release.request_actions` what the pass writes and says about them;
`RequestWriter` sends it, as leader only:

- **create**: one PodTemplate per member shape, copied from one member read once (GET;
  the informer keeps members reduced) as its placeholder would be (`placeholder_pod`:
  the effective requests, nodeSelector, required affinity, tolerations, topology),
  with the member's PriorityClass, then the request naming them, both labelled with
  the gang and owner-referenced to its workload with `controller: false`. Names are
  deterministic (`<gang>-gkpr-<attempt>`, `-<set>` for templates), so "already exists"
  is adoption (a restarted controller, or a pass ago).
- **delete**: requests the plan replaces (a retry) or no gang needs (orphans), and
  PodTemplates of no live request.
- **Events**: one per request and reason (retry after `Failed`/`BookingExpired`, give
  up, capacity revoked), and one per gang and cause when the API server refuses a
  create (quota, RBAC) with its message.

The members' annotations and release go in the controller's gate-lifting patch
(`writes.ungate_patch`): one guarded patch per member.

May do API I/O (podtemplates, provisioningrequests, pods: get); decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import wait
from typing import Any

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies import names
from gangkeeper.policies.autoscaling.placeholders import placeholder_pod
from gangkeeper.policies.autoscaling.provisioning import (
    PodSet,
    RequestAsk,
    RequestInfo,
    TemplateInfo,
    request_info,
    template_info,
)
from gangkeeper.policies.catalogue import Metric
from gangkeeper.policies.release.gang_events import Event
from gangkeeper.policies.release.placeholder_actions import gang_targets
from gangkeeper.policies.release.request_actions import (
    RequestActions,
    refusal_key,
    request_actions,
)
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.settings.config import Config

from ..kube.api import Api, ApiError, Conflict, NotFound
from ..kube.informer import Informer, Informers, Store
from ..kube.resources import Resource
from .capacity_writer import CapacityWriter
from .writes import delete_options

log = logging.getLogger(__name__)

PROVISIONING_REQUESTS = Resource(
    "autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest"
)
POD_TEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate")


def pod_template(
    member: Mapping[str, Any], name: str, request: RequestAsk, config: Config,
    owner: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The PodTemplate that shows cluster-autoscaler one member shape (a pod dict in)."""
    gang_label = request.gang.label
    pod = placeholder_pod(member, gang_label, config.autoscaling, owner)
    spec = dict(pod["spec"])
    # The members' own priority, not the placeholders' (nothing runs from a template).
    for key in ("priorityClassName", "preemptionPolicy"):
        spec.pop(key, None)
    priority_class = (member.get("spec") or {}).get("priorityClassName")
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta = member.get("metadata") or {}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": str(meta.get("namespace", "")),
        "labels": _labels(gang_label, request.name),
    }
    if owner is not None:
        metadata["ownerReferences"] = pod["metadata"]["ownerReferences"]
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": metadata,
        "template": {"metadata": {"labels": _labels(gang_label, request.name)}, "spec": spec},
    }


def provisioning_request(ask: RequestAsk, owner: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ProvisioningRequest of an ask (its PodTemplates named in `ask.create`)."""
    gang = ask.gang
    metadata: dict[str, Any] = {
        "name": ask.name,
        "namespace": gang.namespace,
        "labels": {
            names.PROVISIONING_LABEL: gang.label,
            names.MANAGED_BY_LABEL: names.MANAGED_BY,
        },
    }
    if owner is not None:
        metadata["ownerReferences"] = [{**owner, "controller": False, "blockOwnerDeletion": False}]
    return {
        "apiVersion": PROVISIONING_REQUESTS.api_version,
        "kind": PROVISIONING_REQUESTS.kind,
        "metadata": metadata,
        "spec": {
            "provisioningClassName": ask.class_name,
            "podSets": [
                {"podTemplateRef": {"name": s.template}, "count": s.count} for s in ask.create
            ],
        },
    }


def _labels(gang_label: str, request: str) -> dict[str, str]:
    return {
        names.PROVISIONING_LABEL: gang_label,
        names.PROVISIONING_REQUEST_LABEL: request,
        names.MANAGED_BY_LABEL: names.MANAGED_BY,
        # The webhook must never key a pod made from it (nothing does, but say so).
        names.SKIP_LABEL: "true",
    }


class RequestWriter(CapacityWriter):
    """Carries out a plan's ProvisioningRequest decisions; see the module docstring."""

    def _init_state(self) -> None:
        #: (request uid or gang key, reason) already reported by an Event.
        self._reported: set[tuple[str, str]] = set()

    def actions(
        self, result: Plan, requests: Sequence[RequestInfo], templates: Iterable[TemplateInfo]
    ) -> RequestActions:
        """This pass's decisions (`request_actions`) from the Events said already."""
        return request_actions(result, requests, templates, frozenset(self._reported))

    def send(self, actions: RequestActions) -> None:
        """Send what `actions` says: deletes, creates, Events."""
        # What the pass kept: the Events of requests and gangs that are gone are forgotten.
        self._reported = set(actions.reported)
        for family, labels, value in actions.counts:
            self._count(family, labels, value)
        for event in actions.events:
            log.warning("%s", event.note)
            self._emit(event)
        pool = self._pool()
        wait([pool.submit(self._delete_request, r) for r in actions.delete_requests])
        wait([pool.submit(self._create, ask) for ask in actions.creates])
        wait([pool.submit(self._delete_template, t) for t in actions.delete_templates])

    # -- writes --------------------------------------------------------------------------

    def _create(self, ask: RequestAsk) -> None:
        gang = ask.gang
        owner = gang.owner.reference() if gang.owner is not None else None
        for pod_set in ask.create:
            if not self._template(ask, pod_set, owner):
                return
        if not self._may_write():
            return
        body = provisioning_request(ask, owner)
        try:
            self._rest.request("POST", PROVISIONING_REQUESTS.object_path(gang.namespace, "")
                               .rstrip("/"), self._query, body=body)
        except Conflict:
            return  # made a pass ago, or by a previous leader
        except ApiError as err:
            self._refused(ask, "ProvisioningRequest", err)
            return
        self._count(cat.PROVISIONING_REQUESTS_CREATED)
        log.info("ProvisioningRequest %s/%s for gang %s", gang.namespace, ask.name, gang.name)

    def _template(self, ask: RequestAsk, pod_set: PodSet, owner: Mapping[str, Any] | None) -> bool:
        member = pod_set.member
        if not self._may_write():
            return False
        try:
            raw = self._rest.get(f"/api/v1/namespaces/{member.namespace}/pods/{member.name}")
        except NotFound:
            return False  # gone: the next pass decides again
        except ApiError as err:
            log.warning("reading member %s/%s: %s", member.namespace, member.name, err)
            return False
        body = pod_template(raw, pod_set.template, ask, self._config, owner)
        try:
            self._rest.request("POST", POD_TEMPLATES.object_path(member.namespace, "")
                               .rstrip("/"), self._query, body=body)
        except Conflict:
            return True
        except ApiError as err:
            self._refused(ask, "PodTemplate", err)
            return False
        return True

    def _delete_request(self, request: RequestInfo) -> None:
        self._delete(PROVISIONING_REQUESTS, request.namespace, request.name, request.uid,
                     cat.PROVISIONING_REQUESTS_DELETED)

    def _delete_template(self, template: TemplateInfo) -> None:
        self._delete(POD_TEMPLATES, template.namespace, template.name, template.uid, None)

    def _delete(
        self, resource: Resource, namespace: str, name: str, uid: str, counter: Metric | None
    ) -> None:
        if not self._may_write():
            return
        try:
            self._rest.request("DELETE", resource.object_path(namespace, name), self._query,
                               body=delete_options(uid))
        except (NotFound, Conflict):
            return
        except ApiError as err:
            log.warning("deleting %s %s/%s: %s", resource.kind, namespace, name, err)
            return
        if counter is not None:
            self._count(counter)

    # -- Events ----------------------------------------------------------------------------

    def _report(self, ask: RequestAsk, about: str, reason: str, note: str) -> None:
        key = (about, reason)
        if key in self._reported:
            return
        self._reported.add(key)
        self._count(cat.PROVISIONING_REQUEST_EVENTS, (("reason", reason),))
        log.warning("%s", note)
        self._emit(Event(gang_targets(ask.gang), reason, note))

    def _refused(self, ask: RequestAsk, kind: str, err: ApiError) -> None:
        gang = ask.gang
        cause = "quota" if "quota" in str(err).lower() else str(err.status)
        self._count(cat.PROVISIONING_REQUEST_ERRORS, (("cause", cause),))
        note = (f"gang {gang.namespace}/{gang.name} waits for nodes, but its {kind} was "
                f"refused, so cluster-autoscaler is not asked: {err}")
        self._report(ask, refusal_key(gang, cause), cat.GANG_PROVISIONING_REFUSED, note)


class ProvisioningRequests:
    """The controller's view of its ProvisioningRequests and PodTemplates (two
    informers) and the writer that acts on them."""

    def __init__(self, requests: Informer, templates: Informer, writer: RequestWriter,
                 request_store: Store[RequestInfo], template_store: Store[TemplateInfo]) -> None:
        self._requests = requests
        self._templates = templates
        self.writer = writer
        self.request_store = request_store
        self.template_store = template_store

    @classmethod
    def watching(
        cls, informers: Informers, rest: Api, config: Config, on_change: Callable[[], None],
        **writer: Any,
    ) -> ProvisioningRequests | None:
        """Subscribed to both resources; None when no namespace asks through requests
        (then nothing is watched, and RBAC has no rule for them)."""
        if not config.autoscaling.uses_requests:
            return None
        request_store: Store[RequestInfo] = Store(request_info, on_change)
        template_store: Store[TemplateInfo] = Store(template_info, on_change)
        return cls(
            informers.subscribe(PROVISIONING_REQUESTS, request_store),
            informers.subscribe(POD_TEMPLATES, template_store),
            RequestWriter(rest, config, **writer),
            request_store,
            template_store,
        )

    def served(self) -> list[RequestInfo] | None:
        """The requests, once both are listed; None while the API is not served (or not
        listed yet), when the plan asks with placeholders instead."""
        listed = self._requests.synced.is_set() and self._templates.synced.is_set()
        if not listed or self._requests.absent:
            return None
        return self.request_store.items()

    def actions(self, result: Plan, requests: Sequence[RequestInfo]) -> RequestActions:
        """The writer's decisions, on the PodTemplates watched."""
        return self.writer.actions(result, requests, self.template_store.items())
