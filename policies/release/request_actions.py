"""What is done about gangkeeper's ProvisioningRequests this pass: the requests to
delete and create (the plan's `request_asks` and `request_orphans`), the PodTemplates
of no live request to delete, and the Events the asks carry — one per request and
reason (retry after `Failed`/`BookingExpired`, give up, capacity revoked).

Which Events were posted already is the controller's memory (`reported`: (request
uid or gang key, reason)), passed in and returned; the writer adds the refusals it
meets (a result of its writes) to the same memory.

Pure: the plan, the requests and templates the controller watches, plain values in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .. import catalogue as cat
from ..autoscaling.provisioning import RequestAsk, RequestInfo, TemplateInfo, template_orphans
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
    return RequestActions(
        delete_requests=tuple(doomed), creates=tuple(creates), delete_templates=stale,
        events=tuple(events), counts=tuple(counts), reported=frozenset(told),
    )
