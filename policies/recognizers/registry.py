"""The recognisers gangkeeper ships, registered explicitly, and the two entry points.

`default_registry()` lists every recogniser in the order pods are asked about:
workload kinds first (each claims only pods whose top-level owner is of its kind),
then PodGroup and Kueue keys on the pod, and gangkeeper's own annotations last as
the fallback. Adding a kind is one module and one line here (a kind of the
training-operator family is one row of `trainingoperator.KINDS`, a KubeRay kind one of
`ray.KINDS`); what the rest of gangkeeper needs to know about it is derived from what
it declares (`capabilities`).

`recognize_object` and `recognize_pod` never crash on junk: an object that is not a
Kubernetes object, or of a kind nobody knows, is simply not a gang ([] / None).
InvalidObject is raised only for an object of a known kind with a malformed field.

Pure: the only outside call is the caller's lookup, memoised per call, as are the
metadata and owner chain every recogniser reads (`common.one_call`). Recognisers
that screen pods (`base.ScreensPods`) are skipped, not asked, for pods they rule out.
"""

from __future__ import annotations

from ..memo import MISSING, BoundedMemo
from ..model import Gang, KubeObject, OwnerLookup, PodMembership, PodsLookup
from ..settings.config import Config
from . import ray, trainingoperator
from .annotations import AnnotationsRecognizer
from .base import PodSignals, Recognizer, Registry
from .common import one_call, owner_chain, read_meta, type_of
from .job import JobRecognizer
from .jobset import JobSetRecognizer
from .kueue import KueuePodGroupRecognizer
from .leaderworkerset import LeaderWorkerSetRecognizer
from .owner_gangs import OwnerGangs
from .pod_gangs import POD_BASED, SiblingFacts, summed
from .podgroup import COSCHEDULING, VOLCANO
from .trainjob import TrainJobRecognizer


def _shipped() -> Registry:
    """A registry of every recogniser gangkeeper ships (built once, then shared)."""
    registry = Registry()
    shipped: tuple[Recognizer, ...] = (
        TrainJobRecognizer(),
        JobSetRecognizer(),
        JobRecognizer(),
        *trainingoperator.KINDS,
        LeaderWorkerSetRecognizer(),
        *ray.KINDS,
        VOLCANO,
        COSCHEDULING,
        KueuePodGroupRecognizer(),
        AnnotationsRecognizer(),
    )
    for recognizer in shipped:
        registry.register(recognizer)
    return registry


#: Every recogniser is stateless: one registry serves every caller.
_DEFAULT = _shipped()


def default_registry() -> Registry:
    """The registry of every recogniser gangkeeper ships (one, shared)."""
    return _DEFAULT


#: Owner lookups remembered by one call: its pod's owner chain and, when it sums a
#: gang, the siblings' (the same owners); past that the oldest are asked again.
CALL_LOOKUPS = 256


def _memoised(lookup: OwnerLookup) -> OwnerLookup:
    """The lookup, answering repeated questions from memory within one call.

    Several recognisers walk the same owner chain of a pod; the caller's lookup
    may be a cache with locks, so each question is asked once.
    """
    answers: BoundedMemo[tuple[str, str, str, str], KubeObject | None]
    answers = BoundedMemo(CALL_LOOKUPS)

    def ask(api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        key = (api_version, kind, namespace, name)
        found = answers.lookup(key)
        if found is MISSING:
            found = lookup(api_version, kind, namespace, name)
            answers.put(key, found)
        return found

    return ask


def _signals(pod: KubeObject, ask: OwnerLookup) -> PodSignals:
    # The very first steps of every workload recogniser (read_meta, then owner_chain
    # with the pod's namespace), memoised for the call, so they raise the same
    # errors and make the same lookups the recognisers would.
    meta = read_meta(pod)
    chain = owner_chain(pod, meta.namespace, ask)
    return PodSignals(frozenset((link.group, link.kind) for link in chain), meta.labels)


def _summed(
    membership: PodMembership,
    pod: KubeObject,
    recognizer: Recognizer,
    *,
    ask: OwnerLookup,
    config: Config,
    siblings: PodsLookup,
    facts: SiblingFacts | None,
) -> PodMembership:
    def recognise(other: KubeObject) -> PodMembership | None:
        return recognizer.recognize_pod(other, ask, config)

    gang = membership.gang
    return summed(membership, pod, siblings(gang.namespace, gang.name), recognise, config,
                  facts=facts, recognizer=recognizer.name)


def recognize_pod(
    pod: KubeObject, lookup: OwnerLookup, config: Config, registry: Registry | None = None,
    siblings: PodsLookup | None = None, *, owners: OwnerGangs | None = None,
    facts: SiblingFacts | None = None,
) -> PodMembership | None:
    """The gang and role of a pod, or None when it belongs to no gang we can size.

    A pod-based gang (`pod_gangs.POD_BASED`) is summed over the pod and the siblings
    `siblings` knows that the same recogniser puts in the same gang. Owners' gangs are
    remembered in `owners` and what each sibling gave in `facts` (the decider's memos)
    when given.

    Recognisers are asked in registry order; one that screens pods (`may_claim`,
    e.g. a workload recogniser whose kind is nowhere in the pod's owner chain nor
    named by its labels) is skipped when its screen rules the pod out: the TrainJob
    recogniser comes first but most pods are not a TrainJob's, and asking it cost
    every pod about a tenth of /mutate. The order of the registry, and with it every
    precedence (explicit annotations, TrainJob > JobSet > Job), is untouched.
    """
    if type_of(pod) != ("", "Pod"):
        return None
    ask = _memoised(lookup)
    signals: PodSignals | None = None
    with one_call(owners):
        chosen = registry if registry is not None else default_registry()
        for recognizer, may_claim in chosen.screened():
            if may_claim is not None:
                if signals is None:
                    signals = _signals(pod, ask)
                if not may_claim(signals):
                    continue
            membership = recognizer.recognize_pod(pod, ask, config)
            if membership is not None:
                if siblings is not None and recognizer.name in POD_BASED:
                    membership = _summed(
                        membership, pod, recognizer, ask=ask, config=config, siblings=siblings,
                        facts=facts,
                    )
                return membership
    return None


def recognize_object(
    obj: KubeObject, lookup: OwnerLookup, config: Config, registry: Registry | None = None,
    siblings: PodsLookup | None = None, *, owners: OwnerGangs | None = None,
    facts: SiblingFacts | None = None,
) -> list[Gang]:
    """The gangs a workload object (or a pod) makes; [] when it is not a gang."""
    kind = type_of(obj)
    if kind is None:
        return []
    if kind == ("", "Pod"):
        membership = recognize_pod(
            obj, lookup, config, registry, siblings, owners=owners, facts=facts
        )
        return [membership.gang] if membership is not None else []
    ask = _memoised(lookup)
    with one_call(owners):
        for recognizer in registry if registry is not None else default_registry():
            gangs = recognizer.recognize_object(obj, ask, config)
            if gangs is not None:
                return gangs
    return []


__all__ = ["default_registry", "recognize_object", "recognize_pod"]
