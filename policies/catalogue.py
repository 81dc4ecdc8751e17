"""Every metric gangkeeper exposes on `/metrics` and every Event reason it writes.

Operators build dashboards, alerts and Event filters on these names, so they are
declared once, here: a metric with its type, label names and help text, an Event
reason with its type (Normal or Warning) and when it is written. The exposition
(`gangkeeper.webhook.series`) takes the type and help of every family from this
module and refuses a sample of a metric it does not declare or with other labels;
`event_body` (`webhook.controller.writes`) takes an Event's type from here and refuses
a reason not declared. The README's tables are held to this module by a test, as the
names of `names.py` are.

Only declarations: no I/O, no logic beyond looking a name up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

MetricType = Literal["counter", "gauge", "histogram", "summary"]
EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class Metric:
    """One metric family: `histogram` families have `_bucket`/`_sum`/`_count` series
    (with the extra label `le` on buckets, the upper bounds `buckets` and +Inf),
    `summary` families `_sum`/`_count` only."""

    name: str
    type: MetricType
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()


@dataclass(frozen=True)
class EventReason:
    """One Event reason: its type and when gangkeeper writes it."""

    reason: str
    type: EventType
    when: str


_METRICS: dict[str, Metric] = {}
_REASONS: dict[str, EventReason] = {}


def _metric(
    name: str, kind: MetricType, labels: tuple[str, ...], help_text: str,
    buckets: tuple[float, ...] = (),
) -> Metric:
    assert name not in _METRICS, f"{name} declared twice"
    assert (kind == "histogram") == bool(buckets), f"{name}: buckets are for histograms"
    metric = _METRICS[name] = Metric(name, kind, labels, help_text, buckets)
    return metric


#: Admission latency buckets (seconds): the API server's webhook timeout is 5 s and
#: interesting latencies are well under 10 ms.
DURATION_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)
#: Seconds from the last member to release / to all bound: creationTimestamp is kept
#: to the second, so the buckets start at one second.
WAIT_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
#: Seconds to lift a gang's gates (one patch per member, in parallel).
GATE_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: Seconds of one planning pass: a few ms when nothing changed, seconds for a burst of
#: tens of thousands of pods; buckets so the p50 and p99 of passes can be read.
PLAN_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)


def _reason(reason: str, kind: EventType, when: str) -> str:
    assert reason not in _REASONS, f"{reason} declared twice"
    _REASONS[reason] = EventReason(reason, kind, when)
    return reason


# --- the admission server ------------------------------------------------------------

ADMISSION_DURATION = _metric(
    "gangkeeper_admission_duration_seconds", "histogram", ("endpoint", "verdict"),
    "Time to answer an AdmissionReview.", DURATION_BUCKETS)
ADMISSION_REQUESTS = _metric(
    "gangkeeper_admission_requests_total", "counter", ("endpoint", "outcome"),
    "AdmissionReviews and refused requests by outcome.")
ADMISSION_REJECTIONS = _metric(
    "gangkeeper_admission_rejections_total", "counter", ("endpoint", "reason"),
    "Denied admissions by reason code.")
ADMISSION_DECISIONS = _metric(
    "gangkeeper_admission_decisions_total", "counter", ("endpoint", "verdict", "reason"),
    "Admission decisions by verdict and reason (or outcome when admitted).")
CACHE_SYNCED = _metric(
    "gangkeeper_cache_synced", "gauge", ("resource",),
    "1 when the watch cache of a resource has listed at least once.")
CERTIFICATE_EXPIRY = _metric(
    "gangkeeper_certificate_expiry_timestamp_seconds", "gauge", (),
    "notAfter of the serving certificate, as a unix timestamp.")
CERTIFICATE_RELOADS = _metric(
    "gangkeeper_certificate_reloads_total", "counter", (),
    "Serving certificates loaded after a change on disk.")
OWNER_FETCHES = _metric(
    "gangkeeper_owner_fetches_total", "counter", (),
    "Admissions decided in a worker thread to fetch an owner the watch caches lacked.")

# --- the gang controller: state at the last pass -------------------------------------

CONTROLLER_LEADER = _metric(
    "gangkeeper_controller_leader", "gauge", (), "1 while this process holds the Lease.")
CONTROLLER_SYNCED = _metric(
    "gangkeeper_controller_synced", "gauge", (),
    "1 once the controller's pod and node caches have listed.")
CONTROLLER_RELISTS = _metric(
    "gangkeeper_controller_relists_total", "counter", ("resource",),
    "Full re-lists of a watched resource (after 410 Gone or a broken watch).")
CONTROLLER_PLAN_SECONDS = _metric(
    "gangkeeper_controller_plan_seconds", "histogram", (), "Time spent planning, per pass.",
    PLAN_BUCKETS)
GANGS = _metric(
    "gangkeeper_gangs", "gauge", ("state",),
    "Gangs at the last pass by state (waiting, releasing, released).")
GANGS_WAITING = _metric(
    "gangkeeper_gangs_waiting", "gauge", ("reason",),
    "Waiting gangs at the last pass by wait cause.")
GANGS_STUCK = _metric(
    "gangkeeper_gangs_stuck", "gauge", (), "Gangs waiting longer than gangTimeoutSeconds.")
PENDING_GANGS = _metric(
    "gangkeeper_pending_gangs", "gauge", ("reason",),
    "Gangs not released at the last pass by wait cause (Kueue's name).")
GANGS_PARTLY_BOUND = _metric(
    "gangkeeper_gangs_partly_bound", "gauge", (),
    "Released gangs of which some members are bound and some not.")
GANG_PARTLY_BOUND_SECONDS = _metric(
    "gangkeeper_gang_partly_bound_seconds", "gauge", (),
    "The longest time a gang has now been partly bound.")
GANG_QUEUE_POSITION = _metric(
    "gangkeeper_gang_queue_position", "gauge", ("namespace", "gang"),
    "A waiting gang's place among the gangs waiting for nodes it may use (1 is next).")
GANGS_NOT_READY = _metric(
    "gangkeeper_gangs_not_ready", "gauge", (),
    "Gangs all bound but not all Ready podsReadyTimeoutSeconds after release.")

# --- the gang controller: releases ---------------------------------------------------

GANG_RELEASES = _metric(
    "gangkeeper_gang_releases_total", "counter", ("backend",), "Gangs released.")
GANG_RELEASE_SECONDS = _metric(
    "gangkeeper_gang_release_seconds", "summary", (),
    "Time to carry out a pass's releases (group objects and gate removals).")
GANG_UNGATED_PODS = _metric(
    "gangkeeper_gang_ungated_pods_total", "counter", (), "Gate-removal patches applied.")
GANG_UNGATE_ERRORS = _metric(
    "gangkeeper_gang_ungate_errors_total", "counter", ("cause",),
    "Gate-removal patches not applied (conflict: the pod changed or is gone; error).")
GANG_PINNED_PODS = _metric(
    "gangkeeper_gang_pinned_pods_total", "counter", (),
    "Members released pinned to a node.")
GANG_UNPINNED_RELEASES = _metric(
    "gangkeeper_gang_unpinned_releases_total", "counter", (),
    "Gate-backend gangs released without pins.")
GANG_REJOINED_PODS = _metric(
    "gangkeeper_gang_rejoined_pods_total", "counter", (),
    "Members released to rejoin a gang released before.")
GANG_GROUPS_CREATED = _metric(
    "gangkeeper_gang_groups_created_total", "counter", ("backend",),
    "Group objects (PodGroups) created for a release.")
GANG_GROUP_ERRORS = _metric(
    "gangkeeper_gang_group_errors_total", "counter", ("backend",),
    "Group objects that could not be created (the release waits).")
GANG_STUCK_REPORTS = _metric(
    "gangkeeper_gang_stuck_reports_total", "counter", ("reason",),
    "Events written about stuck gangs, by wait cause.")
CONTROLLER_FENCED_WRITES = _metric(
    "gangkeeper_controller_fenced_writes_total", "counter", (),
    "Writes not sent because this process was no longer surely the leader.")
PODGROUP_REQUEUES = _metric(
    "gangkeeper_podgroup_requeues_total", "counter", (),
    "Coscheduling PodGroups nudged after GPUs were freed.")

# --- the gang controller: watchdog ---------------------------------------------------

GANG_REQUEUES = _metric(
    "gangkeeper_gang_requeues_total", "counter", ("cause", "how"),
    "Gangs requeued (cause: rebind or not-ready; how: delete or suspend).")
PLAN_DIVERGENCE = _metric(
    "gangkeeper_plan_divergence_total", "counter", (),
    "Planning passes that decided otherwise than a from-scratch plan of the same state "
    "(checked once a minute; the from-scratch plan is used).")
PREEMPTIONS = _metric(
    "gangkeeper_preemptions_total", "counter", ("outcome",),
    "Preemptions for waiting gangs (outcome: started, refused, when the Eviction API "
    "refused a victim, or failed).")
PREEMPTED_GPUS = _metric(
    "gangkeeper_preempted_gpus_total", "counter", (),
    "GPUs freed by preemptions the controller started.")
GANG_REBINDS = _metric(
    "gangkeeper_gang_rebinds_total", "counter", (),
    "Gangs requeued because pinned members stayed unbound.")

# --- the gang controller: timings (histograms) ---------------------------------------

GANG_LAST_MEMBER_TO_RELEASE = _metric(
    "gangkeeper_gang_last_member_to_release_seconds", "histogram", ("backend",),
    "From the newest member's creation to the gang's release.", WAIT_BUCKETS)
GANG_LAST_MEMBER_TO_ALL_BOUND = _metric(
    "gangkeeper_gang_last_member_to_all_bound_seconds", "histogram", ("backend",),
    "From the newest member's creation to all members bound.", WAIT_BUCKETS)
GATE_REMOVAL_DURATION = _metric(
    "gangkeeper_gate_removal_duration_seconds", "histogram", ("backend",),
    "Time to lift a gang's gates (one patch per member, in parallel).", GATE_BUCKETS)

# --- the gang controller: asked-for capacity -----------------------------------------

PLACEHOLDERS_CREATED = _metric(
    "gangkeeper_placeholders_created_total", "counter", (), "Placeholder pods created.")
PLACEHOLDERS_DELETED = _metric(
    "gangkeeper_placeholders_deleted_total", "counter", (), "Placeholder pods deleted.")
PLACEHOLDERS_PREEMPTED = _metric(
    "gangkeeper_placeholders_preempted_total", "counter", (),
    "Placeholder pods preempted or deleted by someone else.")
PLACEHOLDER_ERRORS = _metric(
    "gangkeeper_placeholder_errors_total", "counter", ("cause",),
    "Placeholder pods refused by the API server (quota or HTTP status).")
PROVISIONING_TIMEOUTS = _metric(
    "gangkeeper_provisioning_timeouts_total", "counter", (),
    "Gangs whose placeholders got no nodes within provisioningTimeoutSeconds.")
PROVISIONING_REQUESTS_CREATED = _metric(
    "gangkeeper_provisioning_requests_created_total", "counter", (),
    "ProvisioningRequests created.")
PROVISIONING_REQUESTS_DELETED = _metric(
    "gangkeeper_provisioning_requests_deleted_total", "counter", (),
    "ProvisioningRequests deleted.")
PROVISIONING_REQUEST_EVENTS = _metric(
    "gangkeeper_provisioning_request_events_total", "counter", ("reason",),
    "Events written about ProvisioningRequests, by Event reason.")
PROVISIONING_REQUEST_ERRORS = _metric(
    "gangkeeper_provisioning_request_errors_total", "counter", ("cause",),
    "ProvisioningRequests or PodTemplates refused by the API server.")

# --- Event reasons -------------------------------------------------------------------

GANG_INCOMPLETE = _reason(
    "GangIncomplete", "Warning",
    "a gang has waited past gangTimeoutSeconds with fewer members than minMember")
GANG_DOES_NOT_FIT = _reason(
    "GangDoesNotFit", "Warning",
    "a gang has waited past gangTimeoutSeconds because it does not fit the free capacity")
GANG_HELD = _reason(
    "GangHeld", "Warning",
    "a gang has waited past gangTimeoutSeconds behind an older gang that claims its pools")
GANG_INVALID = _reason(
    "GangInvalid", "Warning",
    "a gang has waited past gangTimeoutSeconds because its members disagree")
GANG_WAITING_FOR_NODES = _reason(
    "GangWaitingForNodes", "Warning",
    "a gang has waited past gangTimeoutSeconds for nodes an autoscaler was asked for")
GANG_RELEASED_UNPINNED = _reason(
    "GangReleasedUnpinned", "Warning",
    "a gate-backend gang was released without pins (the note says why)")
GANG_MEMBER_REJOINED = _reason(
    "GangMemberRejoined", "Normal",
    "a member was released to rejoin a gang released before (a replacement)")
GANG_NOT_READY = _reason(
    "GangNotReady", "Warning",
    "a gang is all bound but not all Ready podsReadyTimeoutSeconds after release")
GANG_PREEMPTING = _reason(
    "GangPreempting", "Normal",
    "a waiting gang preempts lower-priority gangs (requeued whole) and pods (evicted)")
PREEMPTED_BY_GANG = _reason(
    "PreemptedByGang", "Warning",
    "a gang, or a pod of no gang, was preempted for a waiting gang of higher priority")
GANG_PREEMPTION_BLOCKED = _reason(
    "GangPreemptionBlocked", "Warning",
    "the Eviction API refused a victim of a gang's preemption (a PodDisruptionBudget)")
GANG_REQUEUED = _reason(
    "GangRequeued", "Warning",
    "the watchdog requeued a whole gang (suspended its owner or deleted all members)")
GANG_MEMBERS_RECREATED = _reason(
    "GangMembersRecreated", "Warning",
    "the watchdog deleted members pinned but unbound for their owner to recreate")
GANG_MEMBER_STUCK = _reason(
    "GangMemberStuck", "Warning",
    "members stay pinned but unbound and the watchdog may not requeue them")
GANG_PLACEHOLDERS_REFUSED = _reason(
    "GangPlaceholdersRefused", "Warning",
    "the API server refused a gang's placeholder pods")
GANG_PROVISIONING_TIMED_OUT = _reason(
    "GangProvisioningTimedOut", "Warning",
    "a gang's placeholders got no nodes within provisioningTimeoutSeconds")
GANG_PLACEHOLDER_PREEMPTED = _reason(
    "GangPlaceholderPreempted", "Warning",
    "a gang's placeholder pod was preempted or deleted by someone else")
GANG_PROVISIONING_REFUSED = _reason(
    "GangProvisioningRefused", "Warning",
    "the API server refused a gang's ProvisioningRequest or PodTemplate")
GANG_PROVISIONING_FAILED = _reason(
    "GangProvisioningFailed", "Warning",
    "an attempt of a gang's ProvisioningRequest failed; gangkeeper asks again")
GANG_PROVISIONING_GAVE_UP = _reason(
    "GangProvisioningGaveUp", "Warning",
    "the last attempt of a gang's ProvisioningRequest failed; gangkeeper stops asking")
GANG_PROVISIONING_REVOKED = _reason(
    "GangProvisioningRevoked", "Warning",
    "the capacity of a gang's ProvisioningRequest was revoked; gangkeeper stops asking")

#: The Event reason of a stuck gang, per wait cause (`release.plan.WaitCode`).
WAIT_REASONS: Mapping[str, str] = {
    "incomplete": GANG_INCOMPLETE,
    "no-fit": GANG_DOES_NOT_FIT,
    "held": GANG_HELD,
    "invalid": GANG_INVALID,
    "provisioning": GANG_WAITING_FOR_NODES,
    "preempting": GANG_PREEMPTING,
}

#: Every metric, in the order declared (the README's table's order).
METRICS: tuple[Metric, ...] = tuple(_METRICS.values())
#: Every Event reason, in the order declared.
EVENT_REASONS: tuple[EventReason, ...] = tuple(_REASONS.values())


def metric(name: str) -> Metric | None:
    """The metric family named `name`, or None."""
    return _METRICS.get(name)


def event_reason(reason: str) -> EventReason:
    """The declared Event reason; ValueError naming it when it is not declared."""
    found = _REASONS.get(reason)
    if found is None:
        raise ValueError(f"Event reason {reason!r} is not in gangkeeper.policies.catalogue")
    return found
