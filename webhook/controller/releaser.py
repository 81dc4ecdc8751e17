"""`Releaser`: sends a plan's releases, for the gang controller and for
`gangkeeper ungate` alike (one way to release, so the command releases exactly as
the controller does).

For each release: the group object first where the backend needs one
(`GroupWriter.ensure`; a release whose group cannot be made is left gated), then the
gang's placeholder pods deleted (their room is the gang's: the members must find it
free when they arrive), then each member's gate lifted (`lift`) with the guarded
patch (`gate_lifter`), pinned where the plan placed it and with a provisioned
request's consume annotations. A 422 (the pod changed since it was read) is retried
once on the pod as it is now when no plan could tell it from the one read (the
scheduler's SchedulingGated condition, most often); any other change is left to the
next pass, which decides again on fresh state.

May do API I/O (group creates, placeholder deletes, pod patches and reads) through
the handles it is given; fencing (`may_write`), the pool and what is kept of a lifted
pod are the caller's. Decides nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gangkeeper.policies import catalogue as cat
from gangkeeper.policies.cluster.observed_gangs import PodInfo, same_for_planning
from gangkeeper.policies.release.results import Release

from ..kube.api import Api, ApiError
from ..series import Count
from .gate_lifter import lift_gate
from .group_writer import GroupWriter

log = logging.getLogger(__name__)

#: What a lift came to: "ungated", or why not ("fenced", "conflict", "error").
Outcome = str


class Releaser:
    """Sends releases; see the module docstring."""

    def __init__(
        self,
        rest: Api,
        groups: GroupWriter,
        delete_placeholders: Callable[[Sequence[PodInfo]], None],
        read: Callable[[Mapping[str, Any]], PodInfo | None],
        count: Count,
        *,
        may_write: Callable[[], bool] = lambda: True,
        lifted: Callable[[Mapping[str, Any]], None] = lambda _: None,
    ) -> None:
        """`delete_placeholders`: deletes placeholder pods (the controller's writer);
        `read`: a pod dict as the caller keeps pods (None: not kept); `may_write`:
        False when fenced; `lifted`: told the pod as the API server has it after its
        gate was lifted (the controller's cache takes it at once)."""
        self.rest = rest
        self.groups = groups
        self._delete_placeholders = delete_placeholders
        self._read = read
        self._count = count
        self._may_write = may_write
        self._lifted = lifted

    def prepare(self, releases: Iterable[Release]) -> list[Release]:
        """Ensure each release's group object and delete the placeholders of those
        ready: the releases whose gates may go now."""
        ready = [r for r in releases
                 if not r.needs_group or (self._may_write() and self.groups.ensure(r.gang))]
        self._delete_placeholders([p for r in ready for p in r.placeholders])
        return ready

    def lift(
        self, pod: PodInfo, node: str | None = None,
        annotations: Mapping[str, str] | None = None, retried: bool = False,
    ) -> Outcome:
        """Lift gangkeeper's gate from `pod` (pinned to `node`): "ungated", or why not."""
        if not self._may_write():
            return "fenced"
        try:
            answer = lift_gate(self.rest, pod, node, time.time(), annotations)
        except ApiError as err:
            # 422: a precondition failed (the pod changed since we read it); 404: gone;
            # 409: conflict.
            if err.status == 422 and not retried:
                fresh = self._reread(pod)
                if fresh is not None:
                    return self.lift(fresh, node, annotations, retried=True)
            outcome = "conflict" if err.status in (404, 409, 422) else "error"
            if outcome == "error":
                log.warning("ungating %s/%s: %s", pod.namespace, pod.name, err)
            self._count(cat.GANG_UNGATE_ERRORS, (("cause", outcome),))
            return outcome
        self._count(cat.GANG_UNGATED_PODS)
        self._lifted(answer)
        return "ungated"

    def _reread(self, pod: PodInfo) -> PodInfo | None:
        """The pod as the API has it now, if no plan could tell it from `pod`."""
        try:
            fresh = self._read(self.rest.get(f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"))
        except ApiError:
            return None
        return fresh if fresh is not None and same_for_planning(pod, fresh) else None
