"""The recognisers gangkeeper ships, registered explicitly, and the two entry points.

`default_registry()` lists every recogniser in the order pods are asked about:
workload kinds first (each claims only pods whose top-level owner is of its kind),
then PodGroup and Kueue keys on the pod, and gangkeeper's own annotations last as
the fallback. Adding a kind is one module and one line here.

`recognize_object` and `recognize_pod` never crash on junk: an object that is not a
Kubernetes object, or of a kind nobody knows, is simply not a gang ([] / None).
InvalidObject is raised only for an object of a known kind with a malformed field.

Pure: the only outside call is the caller's lookup, memoised per call, as are the
metadata and owner chain every recogniser reads (`common.one_call`). Workload
recognisers a pod's owner chain rules out are skipped, not asked (`_ruled_out`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..config import Config
from ..model import Gang, KubeObject, OwnerLookup, PodMembership, PodsLookup
from ..pod_gangs import POD_BASED, summed
from . import jaxjob, mpijob, paddlejob, pytorchjob, tfjob, xgboostjob
from .annotations import AnnotationsRecognizer
from .base import Recognizer, Registry
from .common import one_call, owner_chain, read_meta, type_of
from .job import JOB, JobRecognizer
from .jobset import JOBSET, JOBSET_NAME_LABEL, TRAINJOB, JobSetRecognizer
from .kueue import KueuePodGroupRecognizer
from .leaderworkerset import LeaderWorkerSetRecognizer
from .podgroup import COSCHEDULING, VOLCANO
from .trainingoperator import GROUP as TRAINING_OPERATOR_GROUP
from .trainingoperator import TrainingOperatorRecognizer
from .trainjob import TrainJobRecognizer


@cache
def default_registry() -> Registry:
    """A registry of every recogniser gangkeeper ships (built once, then shared)."""
    registry = Registry()
    for recognizer in (
        TrainJobRecognizer(),
        JobSetRecognizer(),
        JobRecognizer(),
        pytorchjob.RECOGNIZER,
        tfjob.RECOGNIZER,
        mpijob.RECOGNIZER,
        xgboostjob.RECOGNIZER,
        paddlejob.RECOGNIZER,
        jaxjob.RECOGNIZER,
        LeaderWorkerSetRecognizer(),
        VOLCANO,
        COSCHEDULING,
        KueuePodGroupRecognizer(),
        AnnotationsRecognizer(),
    ):
        registry.register(recognizer)
    return registry


def _memoised(lookup: OwnerLookup) -> OwnerLookup:
    """The lookup, answering repeated questions from memory within one call.

    Several recognisers walk the same owner chain of a pod; the caller's lookup
    may be a cache with locks, so each question is asked once.
    """
    answers: dict[tuple[str, str, str, str], KubeObject | None] = {}

    def ask(api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        key = (api_version, kind, namespace, name)
        if key not in answers:
            answers[key] = lookup(api_version, kind, namespace, name)
        return answers[key]

    return ask


@dataclass(frozen=True)
class _Signals:
    """What a pod shows cheaply: the (group, kind) of every controller owner up its
    chain, and whether it names a JobSet by label."""

    owners: frozenset[tuple[str, str]]
    jobset_label: bool


def _signals(pod: KubeObject, ask: OwnerLookup) -> _Signals:
    # The very first steps of every workload recogniser (read_meta, then owner_chain
    # with the pod's namespace), memoised for the call, so they raise the same
    # errors and make the same lookups the recognisers would.
    meta = read_meta(pod)
    chain = owner_chain(pod, meta.namespace, ask)
    return _Signals(
        frozenset((link.group, link.kind) for link in chain),
        bool(meta.labels.get(JOBSET_NAME_LABEL, "")),
    )


#: The shipped recognisers whose first test `_ruled_out` restates.
_SCREENED = (TrainJobRecognizer, JobSetRecognizer, JobRecognizer, TrainingOperatorRecognizer)


def _ruled_out(recognizer: Recognizer, signals: _Signals) -> bool:
    """Whether `recognizer` (one of the _SCREENED kinds) would decline the pod at once.

    Each test restates the recogniser's own first test, so skipping it when the test
    says so changes nothing: it would have returned None before reading anything
    else (no lookups, no errors). The order of the registry, and with it every
    precedence (explicit annotations, TrainJob > JobSet > Job), is untouched. Only the
    exact shipped classes are screened; anything else is always asked.
    """
    kind = type(recognizer)
    owners = signals.owners
    if kind is TrainJobRecognizer:
        # Its TrainJob is an owner, or the owner of the pod's JobSet (an owner or
        # named by label).
        return not (TRAINJOB in owners or JOBSET in owners or signals.jobset_label)
    if kind is JobSetRecognizer:
        return not (JOBSET in owners or signals.jobset_label)
    if kind is JobRecognizer:
        return JOB not in owners
    owner = (TRAINING_OPERATOR_GROUP, recognizer.kind)  # type: ignore[attr-defined]
    return owner not in owners


def _summed(
    membership: PodMembership,
    pod: KubeObject,
    recognizer: Recognizer,
    *,
    ask: OwnerLookup,
    config: Config,
    siblings: PodsLookup,
) -> PodMembership:
    def recognise(other: KubeObject) -> PodMembership | None:
        return recognizer.recognize_pod(other, ask, config)

    gang = membership.gang
    return summed(membership, pod, siblings(gang.namespace, gang.name), recognise, config)


def recognize_pod(
    pod: KubeObject,
    lookup: OwnerLookup,
    config: Config,
    registry: Registry | None = None,
    siblings: PodsLookup | None = None,
) -> PodMembership | None:
    """The gang and role of a pod, or None when it belongs to no gang we can size.

    A pod-based gang (`pod_gangs.POD_BASED`) is summed over the pod and the siblings
    `siblings` knows that the same recogniser puts in the same gang.

    Recognisers are asked in registry order; a workload recogniser whose kind is
    nowhere in the pod's owner chain (nor named by its labels) is skipped without
    being asked (`_ruled_out`): the TrainJob recogniser comes first but most pods
    are not a TrainJob's, and asking it cost every pod about a tenth of /mutate.
    """
    if type_of(pod) != ("", "Pod"):
        return None
    ask = _memoised(lookup)
    signals: _Signals | None = None
    with one_call():
        for recognizer in registry if registry is not None else default_registry():
            if type(recognizer) in _SCREENED:
                if signals is None:
                    signals = _signals(pod, ask)
                if _ruled_out(recognizer, signals):
                    continue
            membership = recognizer.recognize_pod(pod, ask, config)
            if membership is not None:
                if siblings is not None and recognizer.name in POD_BASED:
                    membership = _summed(
                        membership, pod, recognizer, ask=ask, config=config, siblings=siblings
                    )
                return membership
    return None


def recognize_object(
    obj: KubeObject,
    lookup: OwnerLookup,
    config: Config,
    registry: Registry | None = None,
    siblings: PodsLookup | None = None,
) -> list[Gang]:
    """The gangs a workload object (or a pod) makes; [] when it is not a gang."""
    kind = type_of(obj)
    if kind is None:
        return []
    if kind == ("", "Pod"):
        membership = recognize_pod(obj, lookup, config, registry, siblings)
        return [membership.gang] if membership is not None else []
    ask = _memoised(lookup)
    with one_call():
        for recognizer in registry if registry is not None else default_registry():
            gangs = recognizer.recognize_object(obj, ask, config)
            if gangs is not None:
                return gangs
    return []


__all__ = ["default_registry", "recognize_object", "recognize_pod"]
