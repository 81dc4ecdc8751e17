"""What is done about gangkeeper's ProvisioningRequests this pass: the requests to
delete and create (the plan's `request_asks` and `request_orphans`), the PodTemplates
of no live request to delete, and the Events the asks carry — one per request and
reason (retry after `Failed`/`BookingExpired`, give up, capacity revoked).

Which Events were posted already is the controller's memory (`reported`: (request
uid or gang key, reason)), passed in and returned; the writer adds the refusals it
meets (a result of its writes) to the same memory, keyed by `refusal_key`. What is
returned keeps only the keys of requests that still exist and of gangs that still ask,
so the memory is bounded by the live requests, not by every gang that ever asked.

Pure: the plan, the requests and templates the controller watches, plain values in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .. import catalogue as cat
from ..autoscaling.provisioning import RequestAsk, RequestInfo, TemplateInfo, template_orphans
from ..cluster.observed_gangs import GangObservation
from .gang_events import Counted, Event
from .placeholder_actions import gang_targets
from .results import Plan

#: (request uid or gang key, reason) of an Event posted already.
Reported = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class RequestActions:
    #: Requests to delete (replaced by a retry, or no gang needs them).
    delete_requests: tuple[RequestInfo, ...] = ()
    #: Asks whose PodTemplates and request are to be created.
    creates: tuple[RequestAsk, ...] = ()
    #: PodTemplates of no live request after this pass's writes.
    delete_templates: tuple[TemplateInfo, ...] = ()
    events: tuple[Event, ...] = ()
    counts: tuple[Counted, ...] = ()
    reported: Reported = frozenset()


def refusal_key(gang: GangObservation, cause: str) -> str:
    """The `reported` key of a refused write for `gang`'s request: one Event per gang
    lifetime (`arrived`) and cause."""
    return f"{_gang_prefix(gang)}{cause}"


def _gang_prefix(gang: GangObservation) -> str:
    return f"{gang.namespace}/{gang.label}/{gang.arrived}/"


def request_actions(
    result: Plan, requests: Sequence[RequestInfo], templates: Iterable[TemplateInfo],
    reported: Reported,
) -> RequestActions:
    """This pass's ProvisioningRequest actions; `requests` and `templates`: the ones
    the controller watches; `reported`: the Events posted already."""
    doomed: list[RequestInfo] = list(result.request_orphans)
    creates: list[RequestAsk] = []
    events: list[Event] = []
    counts: list[Counted] = []
    told = set(reported)
    for ask in result.request_asks:
        doomed.extend(ask.delete)
        if ask.create:
            creates.append(ask)
        reason, note = ask.event
        if reason and (ask.about, reason) not in told:
            told.add((ask.about, reason))
            events.append(Event(gang_targets(ask.gang), reason, note))
            counts.append((cat.PROVISIONING_REQUEST_EVENTS, (("reason", reason),), 1.0))
    created = {(a.gang.namespace, a.name) for a in creates}
    stale = template_orphans(list(templates), requests, {r.uid for r in doomed}, created)
    live = {r.uid for r in requests} | {a.about for a in result.request_asks}
    asking = tuple({_gang_prefix(a.gang) for a in result.request_asks})
    kept = frozenset(k for k in told if k[0] in live or k[0].startswith(asking))
    return RequestActions(
        delete_requests=tuple(doomed), creates=tuple(creates), delete_templates=stale,
        events=tuple(events), counts=tuple(counts), reported=kept,
    )
