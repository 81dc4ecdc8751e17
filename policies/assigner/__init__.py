"""Release as a placement: which node each gated member of a gang goes to.

The stock scheduler places a released gang's members one by one and spreads them
(LeastAllocated over cpu and memory), so a mixed gang released without a plan ends
partly bound. This package decides where every member goes, and how to say so in the
same patch that lifts the gate:

    constraints  `unmodeled(spec)`: the pod constraints the assigner does not model
                 (required pod (anti-)affinity, DoNotSchedule topology spread,
                 hostPorts, PVC volumes, DRA claims a device count cannot place); a
                 gang with one is released unpinned, with the reason.
    assign       `assign(members, nodes) -> Assignment | Unpinned | NoRoom`: an exact
                 search for small gangs, best-fit decreasing for large ones, over
                 every resource the scheduler checks and each member's eligibility.
    domains      `fewest_domains(members, nodes, key)`: the assignment over the fewest
                 domains of a node label (`gangkeeper.io/topology-preferred`).
    pin          `pin_patch(...)`: the JSON patch that lifts gangkeeper's gate and pins
                 the pod with required node affinity `matchFields: metadata.name In
                 [node]` in every term (KEP-3838: additions to a gated pod's
                 scheduling directives); `pin_of(placement)` reads a pin back.

Pure: plain values in, frozen dataclasses and JSON-patch lists out; no I/O.
"""

from __future__ import annotations

from .assign import Assignment, Member, NodeView, NoRoom, Unpinned, assign
from .constraints import unmodeled
from .domains import fewest_domains
from .pin import Pin, pin_of, pin_patch

__all__ = [
    "Assignment",
    "Member",
    "NoRoom",
    "NodeView",
    "Pin",
    "Unpinned",
    "assign",
    "fewest_domains",
    "pin_of",
    "pin_patch",
    "unmodeled",
]
