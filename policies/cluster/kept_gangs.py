"""The pods and gangs of the last planning pass, kept so a pass sees what changed.

The controller's pod store hands the planner the same `PodInfo` object for a pod until
the pod changes (a new object then, even for a status-only update). `KeptGangs.update`
compares this pass's pods with the last pass's by identity: a pod whose object is
another, or that came or went, is *changed*; the gangs it was or is a member of (and
the gang a placeholder pod holds room for) are *dirty* and are read again
(`observed_gangs.gang_of`); every other gang keeps its `GangObservation` object, so
"the same object" means "the same members, unchanged".

Pure: `PodInfo`s in, `GangObservation`s out. Owned by one planner; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..settings.config import Config
from .observed_gangs import GangObservation, PodInfo, gang_of, gang_order

Key = tuple[str, str]


class KeptGangs:
    """The last pass's pods by uid, and its gangs by (namespace, gang label)."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._pods: dict[str, PodInfo] = {}
        self._members: dict[Key, dict[str, PodInfo]] = {}
        self._gangs: dict[Key, GangObservation] = {}
        self._placeholders = 0
        #: Live pods by priority (how many of each).
        self._priorities: dict[int, int] = {}
        #: Of the last `update`: uid → (before, now), and the gangs read again or gone
        #: or holding a changed placeholder.
        self.changes: dict[str, tuple[PodInfo | None, PodInfo | None]] = {}
        self.dirty: set[Key] = set()

    @property
    def floor(self) -> float:
        """The lowest priority of any live pod (inf when none)."""
        return float(min(self._priorities, default=float("inf")))

    @property
    def placeholders(self) -> bool:
        """Some live pod is a placeholder (an autoscaler ask's)."""
        return self._placeholders > 0

    def update(self, live: Sequence[PodInfo]) -> bool:
        """Take this pass's pods; False (nothing kept) when two share a uid."""
        uids = {pod.uid for pod in live}
        if len(uids) != len(live):
            self.__init__(self._config)  # type: ignore[misc]
            return False
        last = self._pods
        changes: dict[str, tuple[PodInfo | None, PodInfo | None]] = {}
        for pod in live:
            old = last.get(pod.uid)
            if old is not pod:
                changes[pod.uid] = (old, pod)
        if len(last) + sum(1 for was, _ in changes.values() if was is None) != len(live):
            for uid, gone in last.items():
                if uid not in uids:
                    changes[uid] = (gone, None)
        dirty: set[Key] = set()
        for uid, (old, new) in changes.items():
            for one, sign in ((old, -1), (new, +1)):
                if one is not None:
                    self._count(uid, one, sign, dirty)
        for key in dirty:
            found = self._members.get(key)
            if found:
                self._gangs[key] = gang_of(key[0], key[1], list(found.values()), self._config)
            else:
                self._members.pop(key, None)
                self._gangs.pop(key, None)
        for uid, (_, new) in changes.items():
            if new is None:
                del last[uid]
            else:
                last[uid] = new
        self.changes, self.dirty = changes, dirty
        return True

    def _count(self, uid: str, pod: PodInfo, sign: int, dirty: set[Key]) -> None:
        """Count a pod in (+1) or out (-1) of the indexes; mark the gangs it touches."""
        left = self._priorities.get(pod.priority, 0) + sign
        if left:
            self._priorities[pod.priority] = left
        else:
            del self._priorities[pod.priority]
        if pod.placeholder_for:
            self._placeholders += sign
            dirty.add((pod.namespace, pod.placeholder_for))
        if not pod.gang or pod.deleting:
            return
        key = (pod.namespace, pod.gang)
        dirty.add(key)
        members = self._members.setdefault(key, {})
        if sign > 0:
            members[uid] = pod
        else:
            members.pop(uid, None)

    def gangs(self) -> list[GangObservation]:
        """Every gang, in the order a pass takes them (`observe_gangs`' order)."""
        return sorted(self._gangs.values(), key=gang_order)
