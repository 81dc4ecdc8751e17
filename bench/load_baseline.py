"""The load benchmark's floor: the same trace with gangkeeper out of the way.

The same gangs (`bench.load.gang_mix`) are created the same way (16 threads, the same
shuffled order: bare pods, Indexed Jobs the Job controller expands, JobSets) into a
namespace that did not opt in, so no webhook is called. Their pods carry a gate of the
benchmark's own (`BASELINE_GATE`, in the pod or the Job's template) instead of
gangkeeper's, and `Releaser` stands in for gangkeeper's controller with no planning
cost: it watches the namespace (`bench.pod_watch`), and when every member of a gang
exists and the gang's GPUs are free it lifts each member's gate and pins it to a node in
one patch — the patch gangkeeper's controller sends (`pin_patch`: gate, the `matchFields
metadata.name` pin, release time), from as many connections (`PATCH_WORKERS`). Nodes are
taken round-robin among those with room. kube-scheduler then binds each pod, with the
same client (50 requests/s by default) as in gangkeeper's run. So both runs make the
same creates, the same patch per released pod and the same bind per released pod,
through the same API server, etcd, kwok, Job/JobSet controllers and scheduler; what the
baseline lacks is exactly gangkeeper's cost: two admission calls per pod, the
controller's watches and planning. gangkeeper's processes run meanwhile (they watch
every pod, as in a cluster where one namespace did not opt in); their CPU then is
reported. A gang that does not fit when complete stays gated: pods here run until
deleted, so free GPUs only shrink. Which gangs fit may differ from gangkeeper's choice;
each run's bound gangs are reported.

Pure part: `place`. Live part: `Releaser` patches pods of the baseline namespace only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

BASELINE_NAMESPACE = "bench-load-baseline"
BASELINE_GATE = "bench.gangkeeper.io/baseline"


def place(size: int, free: MutableMapping[str, int], start: int) -> tuple[list[str], int] | None:
    """One-GPU members onto nodes with room, round-robin from the node at `start`:
    the nodes (taken from `free`) and where the next gang starts; None, `free`
    untouched, when the gang's GPUs are not all free."""
    if sum(free.values()) < size:
        return None
    hosts: list[str] = []
    names, at = list(free), start
    while len(hosts) < size:
        name = names[at % len(names)]
        at += 1
        if free[name] > 0:
            free[name] -= 1
            hosts.append(name)
    return hosts, at % len(names)


class Releaser:
    """Lifts a gang's baseline gates, pinned, once all its members exist and fit."""

    def __init__(
        self, rest: Any, sizes: Mapping[str, int], free: dict[str, int],
        owner: Callable[[Mapping[str, Any]], str | None],
    ) -> None:
        from gangkeeper.webhook.controller.controller import PATCH_WORKERS

        self.rest, self.sizes, self.free, self.owner = rest, sizes, free, owner
        self.members: dict[str, set[str]] = {}
        self.decided: set[str] = set()
        self.failures: list[str] = []
        self._next = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(PATCH_WORKERS)

    def undecided(self) -> int:
        return len(self.sizes) - len(self.decided)

    def __call__(self, pod: Mapping[str, Any]) -> None:
        """A pod as the watch saw it: a gang whose last gated member this is goes now."""
        gang = self.owner(pod)
        gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
        if gang is None or gang not in self.sizes or gang in self.decided:
            return
        if BASELINE_GATE not in gates:
            return
        with self._lock:
            names = self.members.setdefault(gang, set())
            names.add(str(pod["metadata"]["name"]))
            if len(names) < self.sizes[gang]:
                return
            self.decided.add(gang)
            placed = place(self.sizes[gang], self.free, self._next)
            if placed is None:
                return
            hosts, self._next = placed
        for name, host in zip(sorted(names), hosts, strict=True):
            self._pool.submit(self._release, name, host)

    def _release(self, name: str, host: str) -> None:
        from gangkeeper.policies.assigner.pin import pin_patch
        from gangkeeper.policies.model import Placement
        from gangkeeper.webhook.controller.writes import rfc3339
        from gangkeeper.webhook.kube.api import ApiError

        # The baseline's pods ask no affinity: the pin is their one required term.
        patch = pin_patch([BASELINE_GATE], Placement(), 0, host, BASELINE_GATE,
                          released_at=rfc3339(time.time()))
        path = f"/api/v1/namespaces/{BASELINE_NAMESPACE}/pods/{name}"
        for attempt in range(5):
            try:
                self.rest.request("PATCH", path, body=patch,
                                  content_type="application/json-patch+json")
                return
            except ApiError as err:  # a loaded API server: retry as a controller would
                if err.status in (429, 500, 503, 504, 0) and attempt < 4:
                    time.sleep(0.5 * (attempt + 1))
                    continue
                self.failures.append(f"{name}: {err}")
                return

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def node_slots(nodes: Sequence[Mapping[str, Any]], gpus: int) -> dict[str, int]:
    """{node name (what a pin names): free one-GPU slots} of an empty fleet."""
    return {str(n["metadata"]["name"]): gpus for n in nodes}
