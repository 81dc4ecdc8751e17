"""The gang controller: lifts the gates of whole gangs at once.

`controller.GangController` holds the loops (leader election through `kube.lease`, the
informers' stores, the reconciler) and the gate removal; `writes` builds the write
bodies (pure), `group_writer` ensures PodGroups, `events` posts Events, `fencing`
guards every write against a stale leader, and `faults` injects the test-only crashes
of `GANGKEEPER_FAULT`. `placeholders` creates and deletes the placeholder pods of gangs
that wait for an autoscaler's nodes, and `provisioning` their ProvisioningRequests and
PodTemplates instead, where the cluster serves them (both decided by
`gangkeeper.policies.autoscaling`).
What to release, and why the others wait, is planned by the pure
`gangkeeper.policies.release` (observe, fleet, plan, groups, status).
"""

from __future__ import annotations

from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import GangReport, Plan, Release

from .controller import GangController

__all__ = ["GangController", "GangReport", "Plan", "Release", "plan"]
