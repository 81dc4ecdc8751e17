"""ProvisioningRequests: asking cluster-autoscaler for a gang's nodes through its API.

With `autoscaling: provisioningrequest`, where the cluster serves
`autoscaling.x-k8s.io/v1` ProvisioningRequests, a gang that may ask for nodes
(`asking.Asking.consider`: the same rules as placeholders) gets one PodTemplate per
member shape and one ProvisioningRequest with the configured class, instead of
placeholder pods. The conditions are handled as Kueue's provisioning admission check
handles them (pkg/controller/admissionchecks/provisioning/controller.go), in its order:

- `Failed`: asked again with a new request named for the next attempt (Kueue's
  attempt suffix: `<gang>-gkpr-<n>`), after `provisioningRetrySeconds` doubled per
  attempt (at most 16 times) from the condition's lastTransitionTime; after
  `provisioningRequest.retryLimit` retries the gang gives up (an Event says so);
- `CapacityRevoked`: the gang gives up (an Event says so);
- `BookingExpired` while the gang is not released: like `Failed` (a new attempt);
- `Provisioned`: the gang is released with both
  `autoscaling.x-k8s.io/consume-provisioning-request: <name>` and
  `autoscaling.x-k8s.io/provisioning-class-name: <class>` (`release.plan`).

Everything is derived from the objects themselves (the attempt from the name, the
backoff from the condition's time), so a restarted controller decides exactly what its
predecessor would have. A request that gave up stays (garbage-collected with the
gang's owner) as the record of it: deleting it asks again from attempt 1.

Pure: plain dicts and `PodInfo`s in, frozen dataclasses out. The writes are
`webhook.controller.provisioning`'s.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .. import names
from ..catalogue import (
    GANG_PROVISIONING_FAILED,
    GANG_PROVISIONING_GAVE_UP,
    GANG_PROVISIONING_REVOKED,
)
from ..cluster.observed_gangs import GangObservation, PodInfo, parse_time
from ..settings.autoscaling import Autoscaling

#: `<gang label>-gkpr-<attempt>`: deterministic per gang and attempt.
_INFIX = "-gkpr-"
_ATTEMPT = re.compile(rf"{re.escape(_INFIX)}([0-9]+)$")
#: Object names are DNS subdomains (≤ 253); room is left for `-<attempt>-<podset>`.
_MAX_BASE = 200
#: The CRD's limit on podSets (`+kubebuilder:validation:MaxItems=32`).
MAX_POD_SETS = 32

State = Literal["pending", "provisioned", "retry", "gave-up", "revoked"]


@dataclass(frozen=True)
class Condition:
    status: str
    reason: str
    message: str
    #: lastTransitionTime, epoch seconds (0 when absent).
    changed: float


@dataclass(frozen=True)
class RequestInfo:
    """What the plan needs of one ProvisioningRequest gangkeeper made."""

    namespace: str
    name: str
    uid: str
    #: The gang label it asks for (`names.PROVISIONING_LABEL`).
    gang: str
    #: uid of its owner (the gang's workload); "" when it has none.
    owner_uid: str
    attempt: int
    class_name: str
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    deleting: bool = False

    def true(self, kind: str) -> Condition | None:
        found = self.conditions.get(kind)
        return found if found is not None and found.status == "True" else None


@dataclass(frozen=True)
class TemplateInfo:
    """A PodTemplate gangkeeper made for a ProvisioningRequest."""

    namespace: str
    name: str
    uid: str
    request: str


def _meta(raw: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    meta = raw.get("metadata") or {}
    labels = meta.get("labels") or {}
    return meta, labels if isinstance(labels, Mapping) else {}


def request_info(raw: Mapping[str, Any]) -> RequestInfo | None:
    """A ProvisioningRequest dict reduced; None for one gangkeeper did not make."""
    meta, labels = _meta(raw)
    gang = labels.get(names.PROVISIONING_LABEL)
    if not isinstance(gang, str) or not gang:
        return None
    name = str(meta.get("name", ""))
    found = _ATTEMPT.search(name)
    owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, Mapping)]
    conditions: dict[str, Condition] = {}
    for cond in (raw.get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and isinstance(cond.get("type"), str):
            conditions[cond["type"]] = Condition(
                str(cond.get("status", "")), str(cond.get("reason", "")),
                str(cond.get("message", "")), parse_time(cond.get("lastTransitionTime")),
            )
    return RequestInfo(
        namespace=str(meta.get("namespace", "")),
        name=name,
        uid=str(meta.get("uid", "")),
        gang=gang,
        owner_uid=str(owners[0].get("uid", "")) if owners else "",
        attempt=int(found[1]) if found else 1,
        class_name=str((raw.get("spec") or {}).get("provisioningClassName", "")),
        conditions=conditions,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def template_info(raw: Mapping[str, Any]) -> TemplateInfo | None:
    """A PodTemplate dict reduced; None for one gangkeeper did not make."""
    meta, labels = _meta(raw)
    request = labels.get(names.PROVISIONING_REQUEST_LABEL)
    if not isinstance(request, str) or not request or not labels.get(names.PROVISIONING_LABEL):
        return None
    return TemplateInfo(str(meta.get("namespace", "")), str(meta.get("name", "")),
                        str(meta.get("uid", "")), request)


def request_name(gang_label: str, attempt: int) -> str:
    """The request for a gang's `attempt`-th ask (long labels cut and hashed)."""
    base = gang_label
    if len(base) > _MAX_BASE:
        digest = hashlib.sha256(gang_label.encode()).hexdigest()[:10]
        base = f"{gang_label[: _MAX_BASE - 11]}-{digest}"
    return f"{base}{_INFIX}{attempt}"


def template_name(request: str, index: int) -> str:
    """The PodTemplate of a request's `index`-th pod set (Kueue: `ppt-<request>-<set>`)."""
    return f"{request}-{index}"


@dataclass(frozen=True)
class PodSet:
    """One member shape: its PodTemplate (copied from `member`) and how many."""

    template: str
    member: PodInfo
    count: int


def pod_sets(request: str, members: Sequence[PodInfo]) -> tuple[PodSet, ...]:
    """The members grouped by what the autoscaler must fit (requests, constraints)."""
    groups: dict[tuple[object, ...], list[PodInfo]] = {}
    for member in sorted(members, key=lambda m: (m.created, m.name)):
        key = (tuple(sorted(member.requests.items())), tuple(sorted(member.demand.items())),
               member.placement)
        groups.setdefault(key, []).append(member)
    return tuple(
        PodSet(template_name(request, index), group[0], len(group))
        for index, group in enumerate(groups.values())
    )


@dataclass(frozen=True)
class Outcome:
    """What a request's conditions mean (Kueue's order: Failed, CapacityRevoked,
    BookingExpired, Provisioned)."""

    state: State
    #: The deciding condition's reason and message ("" when pending with none).
    why: str = ""
    #: For `retry`: when (epoch) to ask again.
    retry_at: float = 0.0


def outcome(request: RequestInfo, settings: Autoscaling) -> Outcome:
    failed = request.true("Failed")
    expired = request.true("BookingExpired")
    revoked = request.true("CapacityRevoked")
    if revoked is not None and failed is None:
        return Outcome("revoked", _why("CapacityRevoked", revoked))
    for kind, cond in (("Failed", failed), ("BookingExpired", expired)):
        if cond is None:
            continue
        if request.attempt > settings.retry_limit:
            return Outcome("gave-up", _why(kind, cond))
        wait = settings.backoff_seconds(request.attempt)
        return Outcome("retry", _why(kind, cond), cond.changed + wait)
    provisioned = request.true("Provisioned")
    if provisioned is not None:
        return Outcome("provisioned", _why("Provisioned", provisioned))
    pending = request.conditions.get("Provisioned") or request.true("Accepted")
    return Outcome("pending", _why("Provisioned", pending) if pending else "")


def _why(kind: str, cond: Condition) -> str:
    text = f"{kind}"
    if cond.reason:
        text += f" ({cond.reason})"
    return f"{text}: {cond.message}" if cond.message else text


def consume_annotations(request: RequestInfo) -> dict[str, str]:
    """What the members of a gang released onto a provisioned request carry."""
    return {
        names.CONSUME_PROVISIONING_REQUEST_ANNOTATION: request.name,
        names.PROVISIONING_CLASS_ANNOTATION: request.class_name,
    }


def unseen_nodes(request: RequestInfo) -> str:
    """Why a gang goes unpinned: released before the plan sees room for it."""
    return (f"ProvisioningRequest {request.name} is provisioned; its nodes are not all seen "
            "yet, so onto the capacity cluster-autoscaler booked for it")


@dataclass(frozen=True)
class RequestAsk:
    """What the controller does for one gang that asks through a ProvisioningRequest."""

    gang: GangObservation
    #: The request the gang has after this pass (existing, or created now).
    name: str
    class_name: str
    #: Pod sets to create the PodTemplates and the request for; () when it exists.
    create: tuple[PodSet, ...]
    #: This gang's requests to delete (older attempts; the one a retry replaces).
    delete: tuple[RequestInfo, ...]
    #: (Event reason, note), posted once per request and reason; ("", "") for none.
    event: tuple[str, str] = ("", "")
    #: uid of the request the Event is about.
    about: str = ""


@dataclass(frozen=True)
class Decision:
    ask: RequestAsk
    #: Text added to the gang's waiting reason.
    reason: str
    #: The gang still asks (and so claims its pools); False once it gave up.
    asking: bool


def current(requests: Sequence[RequestInfo]) -> RequestInfo | None:
    """The gang's latest attempt (live requests only)."""
    live = [r for r in requests if not r.deleting]
    return max(live, key=lambda r: (r.attempt, r.name), default=None)


def decide(
    gang: GangObservation, requests: Sequence[RequestInfo], settings: Autoscaling, now: float
) -> Decision:
    """The gang's request this pass (`requests`: the live ones made for this gang)."""
    latest = current(requests)
    older = tuple(r for r in requests if r is not latest and not r.deleting)
    cls = settings.provisioning_class
    members = gang.gated

    def create(attempt: int, delete: tuple[RequestInfo, ...], event: tuple[str, str] = ("", ""),
               about: str = "") -> RequestAsk:
        name = request_name(gang.label, attempt)
        return RequestAsk(gang, name, cls, pod_sets(name, members), delete, event, about)

    if latest is None:
        ask = create(1, older)
        return Decision(ask, _asked(ask, len(members), 1), True)
    if len(pod_sets(latest.name, members)) > MAX_POD_SETS:
        note = f"its members have more than {MAX_POD_SETS} shapes, more than a request holds"
        return Decision(RequestAsk(gang, latest.name, latest.class_name, (), older), f"; {note}",
                        False)
    seen = outcome(latest, settings)
    keep = RequestAsk(gang, latest.name, latest.class_name, (), older)
    total = settings.retry_limit + 1
    if seen.state == "pending":
        state = f": {seen.why}" if seen.why else ""
        return Decision(keep, f"; ProvisioningRequest {latest.name} (attempt {latest.attempt} of "
                              f"{total}, {latest.class_name}) not provisioned yet{state}", True)
    if seen.state == "provisioned":
        return Decision(keep, f"; ProvisioningRequest {latest.name} is provisioned", True)
    if seen.state in ("gave-up", "revoked"):
        what = ("the capacity was revoked" if seen.state == "revoked"
                else f"{latest.attempt} of {total} attempts failed")
        note = (f"gang {gang.namespace}/{gang.name}: cluster-autoscaler gave no nodes, "
                f"{what} (ProvisioningRequest {latest.name}: {seen.why}); gangkeeper stops "
                "asking (delete the request to ask again)")
        reason = (GANG_PROVISIONING_REVOKED if seen.state == "revoked"
                  else GANG_PROVISIONING_GAVE_UP)
        ask = RequestAsk(gang, latest.name, latest.class_name, (), older, (reason, note),
                         latest.uid)
        return Decision(ask, f"; {note.split(': ', 1)[1]}", False)
    wait = seen.retry_at - now
    note = (f"gang {gang.namespace}/{gang.name}: ProvisioningRequest {latest.name} (attempt "
            f"{latest.attempt} of {total}): {seen.why}; asking again with attempt "
            f"{latest.attempt + 1} in {max(0.0, wait):.0f}s")
    event = (GANG_PROVISIONING_FAILED, note)
    if wait > 0:
        ask = RequestAsk(gang, latest.name, latest.class_name, (), older, event, latest.uid)
        return Decision(ask, f"; {note.split(': ', 1)[1]}", True)
    ask = create(latest.attempt + 1, (*older, latest), event, latest.uid)
    return Decision(ask, _asked(ask, len(members), latest.attempt + 1), True)


def _asked(ask: RequestAsk, members: int, attempt: int) -> str:
    return (f"; asked cluster-autoscaler for the nodes of its {members} members "
            f"(ProvisioningRequest {ask.name}, attempt {attempt}, {ask.class_name})")


def orphans(
    requests: Sequence[RequestInfo],
    gangs: Mapping[tuple[str, str], str],
    kept: set[str],
    settings: Autoscaling,
) -> tuple[RequestInfo, ...]:
    """Requests nothing needs: those whose gang is gone (`gangs`: (namespace, label) →
    owner uid of the gangs of the pass), and those of a gang that no longer asks,
    unless it was released onto it (provisioned: the booking is its members')."""
    out: list[RequestInfo] = []
    by_gang: dict[tuple[str, str], list[RequestInfo]] = {}
    for request in requests:
        if not request.deleting:
            by_gang.setdefault((request.namespace, request.gang), []).append(request)
    for key, mine in sorted(by_gang.items()):
        owner = gangs.get(key)
        latest = current(mine)
        for request in mine:
            if request.uid in kept:
                continue
            present = owner is not None and owner == request.owner_uid
            if present and request is latest and outcome(request, settings).state == "provisioned":
                continue
            out.append(request)
    return tuple(out)


def template_orphans(
    templates: Sequence[TemplateInfo], requests: Sequence[RequestInfo], deleted: set[str],
    created: set[tuple[str, str]],
) -> tuple[TemplateInfo, ...]:
    """PodTemplates of no live request (`deleted`: request uids deleted this pass;
    `created`: (namespace, name) of requests created this pass)."""
    live = {(r.namespace, r.name) for r in requests if r.uid not in deleted and not r.deleting}
    live |= created
    return tuple(t for t in templates if (t.namespace, t.request) not in live)
