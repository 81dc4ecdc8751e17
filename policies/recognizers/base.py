"""The interface every recogniser implements, and the registry that holds them.

A recogniser turns one kind of object into gangs (`recognize_object`) and tells
whether a pod belongs to a gang of its kind (`recognize_pod`), using an owner-lookup
function the caller supplies. The other capabilities are optional, each a small
protocol discovered when present (as Kueue's optional interfaces):
- `ScreensPods`: it can say from a pod's `PodSignals` alone that it would decline the
  pod, and is not asked about pods it rules out;
- `FollowsOwners`: the owners besides its own kinds it looks up on the way from a pod
  to its workload (`OwnerResource`: what the server watches and the RBAC lets it read);
- `MarksPods`: the label keys (or prefixes) its controller puts on pods, so the pod
  webhooks' match conditions let such a pod through without a GPU request;
- `RequeuesGangs`: how the controller requeues a gang its kind owns (`Requeuing`:
  `suspend` through the resource's `spec.suspend`, or `recreate` by deleting the pods).
`capabilities.py` derives every table other layers need from them. Registration is
explicit data on a `Registry` instance (see `registry.py`), which refuses duplicate
names. Pure: no I/O beyond the lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ..errors import DuplicateRecognizer as DuplicateRecognizer
from ..model import Gang, KubeObject, OwnerLookup, PodMembership
from ..settings.config import Config


@dataclass(frozen=True)
class ResourceRule:
    """An API resource a recogniser validates, as a webhook rule names it."""

    group: str
    versions: tuple[str, ...]
    resource: str  # plural, e.g. "pytorchjobs"
    kind: str


class Recognizer(Protocol):
    # Read-only members, so frozen dataclasses and properties satisfy the protocol
    # as well as plain class attributes do.
    @property
    def name(self) -> str:
        """Registry key, e.g. "job", "jobset", "pytorchjob"."""
        ...

    @property
    def rules(self) -> tuple[ResourceRule, ...]:
        """Workload resources this recogniser validates (empty for pod-only ones)."""
        ...

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        """Gangs of a workload object; None when the object is not of this kind.

        [] means "of this kind but not a gang" (e.g. a Job with parallelism 1).
        Raises InvalidObject naming the field when a field that matters is malformed.
        """
        ...

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        """The gang and role of a pod of this kind; None when not of this kind."""
        ...


@dataclass(frozen=True)
class PodSignals:
    """What a pod shows cheaply, read once per pod for every screening recogniser."""

    #: (group, kind) of every controller owner up the pod's chain (as far as known).
    owners: frozenset[tuple[str, str]]
    labels: Mapping[str, str]


class ScreensPods(Protocol):
    """Optional: a recogniser that can rule a pod out from its signals alone."""

    def may_claim(self, signals: PodSignals) -> bool:
        """False only when `recognize_pod` would return None at its first test, before
        any further lookup or error, so skipping it changes no answer."""
        ...


Screen = Callable[[PodSignals], bool]


@dataclass(frozen=True)
class OwnerResource:
    """An object between a pod and the workload that sizes its gang (LeaderWorkerSet ->
    StatefulSet -> pod), or one the workload is read with (a TrainJob's runtime)."""

    group: str
    version: str
    resource: str  # plural, e.g. "statefulsets"
    kind: str
    #: Why gangkeeper reads it: the reason the RBAC rule that lets the webhook read it
    #: carries (owners of one API group and reason share one rule).
    why: str
    namespaced: bool = True


@runtime_checkable
class FollowsOwners(Protocol):
    """Optional: a recogniser that looks up owners of kinds besides its own `rules`."""

    @property
    def follows(self) -> tuple[OwnerResource, ...]: ...


@runtime_checkable
class MarksPods(Protocol):
    """Optional: label keys, or key prefixes, its kind's controller sets on every pod."""

    @property
    def pod_label_prefixes(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Requeuing:
    """How a gang owned by the recogniser's kinds (its `rules`) is requeued."""

    #: `suspend`: set the owner's boolean `spec.suspend`, whose controller deletes the
    #: pods without counting them as failed, and unset it once they are gone;
    #: `recreate`: delete the pods, which the owner's controller recreates.
    how: Literal["suspend", "recreate"]
    #: `suspend` only: why suspension requeues the gang without failing it, the reason
    #: the RBAC rule that lets the controller patch the owner carries.
    why: str = ""


@runtime_checkable
class RequeuesGangs(Protocol):
    """Optional: the kind's controller brings a requeued gang's pods back."""

    @property
    def requeue(self) -> Requeuing: ...


class Registry:
    """An ordered set of recognisers; earlier ones are asked first for pods."""

    def __init__(self) -> None:
        self._by_name: dict[str, Recognizer] = {}
        self._screened: list[tuple[Recognizer, Screen | None]] = []

    def register(self, recognizer: Recognizer) -> None:
        if recognizer.name in self._by_name:
            raise DuplicateRecognizer(f"recogniser {recognizer.name!r} registered twice")
        self._by_name[recognizer.name] = recognizer
        screen: Screen | None = getattr(recognizer, "may_claim", None)
        self._screened.append((recognizer, screen))

    def screened(self) -> list[tuple[Recognizer, Screen | None]]:
        """Every recogniser in order, with its `may_claim` when it has one."""
        return self._screened

    def __iter__(self) -> Iterator[Recognizer]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)
