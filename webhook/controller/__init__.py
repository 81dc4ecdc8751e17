"""The gang controller: lifts the gates of whole gangs at once.

`controller.GangController` holds the loops (leader election through `kube.lease`, the
informers' stores, the reconciler) and the writes (gate removal, PodGroups, Events).
What to release, and why the others wait, is planned by the pure
`gangkeeper.policies.release` (observe, fleet, plan, groups, status).
"""

from __future__ import annotations

from gangkeeper.policies.release.plan import GangReport, Plan, Release, plan

from .controller import GangController

__all__ = ["GangController", "GangReport", "Plan", "Release", "plan"]
