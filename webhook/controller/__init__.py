"""The gang controller: lifts the gates of whole gangs at once (issue 5).

Layout, pure modules first:
- `keys`: the label/annotation/gate names gang pods carry;
- `observe`: pods → `PodInfo` → `GangObservation` (state read back from the API);
- `fleet`: per-node free GPUs for one planning pass, mirrored into `Capacity`;
- `plan`: the release decision and the per-gang report (`gangkeeper status`);
- `election`: the Lease acquire/renew decision (client-go semantics);
- `podgroups`: the PodGroup object each scheduler backend needs;
and the I/O around them:
- `rest`: JSON requests and watches over the kubernetes `ApiClient`;
- `informer`: list+watch into a store, re-list on 410;
- `controller`: `GangController` (threads: elector, informers, reconciler).
"""

from __future__ import annotations

from gangkeeper.policies.release.plan import GangReport, Plan, Release, plan

from .controller import GangController

__all__ = ["GangController", "GangReport", "Plan", "Release", "plan"]
