"""What is said and counted once a release's gate patches were answered: the
release counted by backend, its pins counted, an Event when a gate-backend gang went
unpinned (a constraint the assigner does not model), and a Normal Event on each
member released into a gang some of whose members were released already (a
replacement: the gang is whole again) — on those whose patch succeeded only, so a
later pass that retries the others makes no second Event.

Pure: the release and the uids lifted in, Events and counters out.
"""

from __future__ import annotations

from collections.abc import Set

from .. import catalogue as cat
from .gang_events import Counted, Event, event_targets, members_event
from .results import Release


def after_release(release: Release, lifted: Set[str]) -> tuple[list[Event], list[Counted]]:
    """The Events and counters of `release` once the pods whose uids are in `lifted`
    had their gates lifted."""
    gang = release.gang
    events: list[Event] = []
    counts: list[Counted] = [(cat.GANG_RELEASES, (("backend", gang.backend),), 1.0)]
    running = gang.present - len(gang.gated)
    pods = [p for p in release.pods if p.uid in lifted]
    if running > 0 and pods:
        rejoined = Event(event_targets(gang.namespace, None, pods), cat.GANG_MEMBER_REJOINED, (
            f"released {len(pods)} member(s) of gang {gang.namespace}/{gang.name} "
            f"at once: {running} of its members were released already"
        ))
        events.append(rejoined)
        counts.append((cat.GANG_REJOINED_PODS, (), float(len(rejoined.regarding))))
    if release.unpinned:
        events.append(members_event(gang.namespace, gang.members, cat.GANG_RELEASED_UNPINNED, (
            f"gang {gang.namespace}/{gang.name} released without pinning its members "
            f"to nodes (the scheduler places them): {release.unpinned}"
        )))
        counts.append((cat.GANG_UNPINNED_RELEASES, (), 1.0))
    elif release.pins:
        counts.append((cat.GANG_PINNED_PODS, (), float(len(release.pins))))
    return events, counts
