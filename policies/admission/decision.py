"""The two entry points the webhook and `gangkeeper check` call.

- `decide_pod(pod, ...)`: recognise the pod's gang, check the gang's feasibility and
  plan the pod's mutation: one `PodDecision` (membership, verdict, the pod as it should
  look or None, and why nothing was changed).
- `validate_object(obj, ...)`: one `ObjectDecision` per gang of a workload object (a
  Pod is answered for its own gang); an object that is not a gang gives [].

A gang none of whose members asks for GPUs is checked (and refused) by what it asks
of cpu, memory and the rest, like any gang, wherever its pods are gated: a pod that
reaches `decide_pod` is gated. A workload is only refused for such a gang when the pod
webhooks would see its pods whatever they ask (its kind marks its pods, `MarksPods`,
or gangkeeper's own annotations key it): a plain batch Job asking no GPUs is ordinary
work, never gated, so never refused.

A GPU pod whose owner is of a kind some recogniser reads but the lookup does not know
(offline `serve` not given it) is let through unchanged, with `unread_owner` naming
that owner so the answer can say why.

`InvalidObject` from the recognisers propagates: the caller answers per
`config.on_unreadable`. Pure: composes recognisers, feasibility and mutation; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..cluster.capacity import Capacity
from ..dra.shared import charged_once
from ..errors import PolicyError
from ..fit.feasibility import check_gang
from ..model import JSON_OBJECT, Gang, KubeObject, OwnerLookup, PodMembership, PodsLookup, Verdict
from ..names import SKIP_LABEL
from ..podspec import pod_demand
from ..recognizers.base import MarksPods, Registry
from ..recognizers.capabilities import followed_owners
from ..recognizers.common import owner_chain
from ..recognizers.owner_gangs import OwnerGangs
from ..recognizers.pod_gangs import SIBLING_FACTS, SiblingFacts, all_seen_note, unseen_warning
from ..recognizers.registry import default_registry, recognize_object, recognize_pod
from ..settings.config import Config
from .mutation import MutationPlan, plan_pod
from .plan_memo import PlanMemo

#: Namespaces never gang-keyed, whatever the webhook configuration says.
NEVER_NAMESPACES = frozenset({"kube-system"})


@dataclass(frozen=True)
class Memos:
    """What one decider (the server) remembers between decisions, each memo bounded.

    Without one (`check`, tests), every decision is computed afresh: the answers are
    the same, only slower. Feasibility answers live in each `Capacity` (`verdicts`).
    """

    #: Plans and patches per pod shape: 4,096 shapes.
    plans: PlanMemo = field(default_factory=lambda: PlanMemo(4096))
    #: Gangs of owner objects: 4,096 owners.
    owners: OwnerGangs = field(default_factory=lambda: OwnerGangs(4096))
    #: What each sibling of a pod-based gang gave: `pod_gangs.SIBLING_FACTS` pods.
    siblings: SiblingFacts = field(default_factory=lambda: SiblingFacts(SIBLING_FACTS))


@dataclass(frozen=True)
class PodDecision:
    """The answer for one pod."""

    #: The pod's gang and role; None when the pod is not part of a gang.
    membership: PodMembership | None
    #: Feasibility of the gang (or a conflict rejection); allowed for non-gang pods.
    verdict: Verdict
    #: Why the pod was left unchanged ("" when patched).
    skipped: str = ""
    plan: MutationPlan | None = None
    #: The pod the plan applies to (metadata.namespace filled in); None when nothing
    #: changes. The patched pod is derived from it on demand: the webhook only needs
    #: the patch.
    target: KubeObject | None = None
    #: The owner a GPU pod names that the lookup did not know ("PyTorchJob team/x"),
    #: when that is why the pod is no gang; "" otherwise.
    unread_owner: str = ""
    #: The RFC 6902 operations that make the request's pod `patched`; [] when nothing
    #: changes. Shared with every pod planned alike (`PlanMemo`): read only.
    patch: list[dict[str, Any]] = field(default_factory=list)

    @cached_property
    def patched(self) -> dict[str, Any] | None:
        """The pod as it should look (read only: shares unchanged parts with the
        request's pod); None when nothing changes."""
        if self.plan is None or self.target is None:
            return None
        return self.plan.apply(self.target)


@dataclass(frozen=True)
class ObjectDecision:
    """The answer for one gang of a validated object."""

    gang: Gang
    verdict: Verdict


def _with_namespace(pod: KubeObject, namespace: str) -> KubeObject:
    """The pod with metadata.namespace filled from the request when absent.

    On CREATE the API server may send a pod without metadata.namespace; the
    recognisers and the gang name need it.
    """
    metadata = pod.get("metadata")
    if not isinstance(metadata, JSON_OBJECT) or metadata.get("namespace") or not namespace:
        return pod
    return {**pod, "metadata": {**metadata, "namespace": namespace}}


def _opted_out(pod: KubeObject) -> bool:
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, JSON_OBJECT) else None
    return isinstance(labels, JSON_OBJECT) and labels.get(SKIP_LABEL) == "true"


def _checked(gang: Gang, capacity: Capacity) -> Verdict:
    """`check_gang`, plus what pod-based gangs add: the warning when members like the
    seen ones could not be packed, and on a rejection the count of members seen."""
    verdict = check_gang(gang, capacity)
    if not verdict.allowed:
        note = all_seen_note(gang)
        return replace(verdict, reason=f"{verdict.reason}; {note}") if note else verdict
    warning = unseen_warning(gang, capacity)
    return replace(verdict, warnings=(*verdict.warnings, warning)) if warning else verdict


def decide_pod(
    pod: KubeObject,
    *,
    namespace: str,
    capacity: Capacity,
    lookup: OwnerLookup,
    config: Config,
    registry: Registry | None = None,
    siblings: PodsLookup | None = None,
    memos: Memos | None = None,
) -> PodDecision:
    """Recognise, check and plan one pod (the mutating and validating pod webhooks)."""
    allowed = Verdict(allowed=True)
    if namespace in NEVER_NAMESPACES:
        return PodDecision(None, allowed, skipped=f"namespace {namespace} is never gang-keyed")
    if _opted_out(pod):
        return PodDecision(None, allowed, skipped=f"pod opted out ({SKIP_LABEL}=true)")
    pod = _with_namespace(pod, namespace)
    owners = memos.owners if memos is not None else None
    facts = memos.siblings if memos is not None else None
    membership = recognize_pod(
        pod, lookup, config, registry, siblings, owners=owners, facts=facts
    )
    if membership is None:
        unread = _unread_owner(pod, namespace, lookup, config, registry)
        if unread:
            why = f"owner {unread} unknown"
            return PodDecision(None, allowed, skipped=why, unread_owner=unread)
        return PodDecision(None, allowed, skipped="not part of a gang")
    # Shared ResourceClaims in its limits are one member's devices for the gang.
    membership = replace(membership, gang=charged_once(membership.gang))
    verdict = _checked(membership.gang, capacity)
    if memos is not None:
        plan, ops = memos.plans.plan(pod, membership, config, namespace)
    else:
        plan = plan_pod(pod, membership, config, namespace)
        ops = plan.json_patch(pod)
    if plan.outcome == "reject":
        verdict = Verdict(
            allowed=False, reason=plan.message, warnings=verdict.warnings, code="conflict"
        )
    if not verdict.allowed:
        return PodDecision(membership, verdict, skipped=verdict.reason, plan=plan)
    if not plan.changes:
        why = plan.message or "already carries its gang keys"
        if plan.left_to:
            # Let through untouched: say so, or the user sees no gang and no reason.
            left = f"gangkeeper left pod {_pod_name(pod)} to {plan.left_to}"
            verdict = replace(verdict, warnings=(*verdict.warnings, left))
        return PodDecision(membership, verdict, skipped=why, plan=plan)
    return PodDecision(membership, verdict, plan=plan, target=pod, patch=ops)


def _unread_owner(
    pod: KubeObject, namespace: str, lookup: OwnerLookup, config: Config,
    registry: Registry | None,
) -> str:
    """The first owner up the pod's chain the lookup did not know, of a kind some
    recogniser reads, when the pod asks for GPUs; "" otherwise (a Deployment's pod is
    no gang whatever its owner says)."""
    try:
        if not pod_demand(pod.get("spec"), config):
            return ""
    except PolicyError:
        return ""  # a spec the recognisers could not read either: not this warning
    recognizers = list(registry if registry is not None else default_registry())
    read = {(r.group, r.kind) for rec in recognizers for r in rec.rules}
    read |= {(o.group, o.kind) for o in followed_owners(recognizers)}
    for link in owner_chain(pod, namespace, lookup):
        if link.obj is None and (link.group, link.kind) in read:
            return f"{link.kind} {namespace}/{link.name}"
    return ""


def _pod_name(pod: KubeObject) -> str:
    """The pod's name, or its generateName (a controller's pods have only that on CREATE)."""
    metadata = pod.get("metadata")
    metadata = metadata if isinstance(metadata, JSON_OBJECT) else {}
    name = metadata.get("name") or metadata.get("generateName")
    return name if isinstance(name, str) and name else "(unnamed)"


def validate_object(
    obj: KubeObject, *, capacity: Capacity, lookup: OwnerLookup, config: Config,
    registry: Registry | None = None, siblings: PodsLookup | None = None,
    memos: Memos | None = None,
) -> list[ObjectDecision]:
    """One decision per gang of a workload object; [] when it is not a gang."""
    if obj.get("kind") == "Pod" and _opted_out(obj):
        return []
    owners = memos.owners if memos is not None else None
    facts = memos.siblings if memos is not None else None
    gangs = recognize_object(obj, lookup, config, registry, siblings, owners=owners, facts=facts)
    gangs = [charged_once(gang) for gang in gangs]
    decisions = [
        ObjectDecision(
            gang,
            _checked(gang, capacity) if _gated(gang, registry) else Verdict(allowed=True),
        )
        for gang in gangs
    ]
    if obj.get("kind") == "Pod" and config.on_conflict == "reject":
        # The mutating webhook refuses a pod of another gang system (a Kueue pod
        # group, Volcano, ...) under onConflict: reject; validation says the same, so
        # `kubectl apply --dry-run=server` and `gangkeeper check` agree with it.
        decisions = [_conflict(obj, d, config) for d in decisions]
    elif config.on_conflict == "reject":
        # A workload whose pods another system keys (Trainer's podGroupPolicy): each
        # of its pods would be refused, so it could never run; say so at apply time.
        decisions = [_keyed_elsewhere(d) for d in decisions]
    return decisions


def _gated(gang: Gang, registry: Registry | None) -> bool:
    """Whether the pod webhooks see this gang's pods whatever they ask (module docstring):
    a gang asking GPUs, or one of a kind that marks its pods or of the annotations."""
    if gang.total_demand():
        return True
    for recognizer in registry if registry is not None else default_registry():
        if recognizer.name == gang.recognizer:
            return isinstance(recognizer, MarksPods) or recognizer.name == "annotations"
    return True


def _keyed_elsewhere(decision: ObjectDecision) -> ObjectDecision:
    gang = decision.gang
    if not gang.keyed_by or not decision.verdict.allowed:
        return decision
    verdict = Verdict(
        allowed=False,
        reason=(
            f"gang {gang.namespace}/{gang.name}: its pods are keyed by {gang.keyed_by}; "
            "with onConflict: reject gangkeeper refuses pods of another gang system, so "
            "none could be created (onConflict: skip leaves them to it)"
        ),
        warnings=decision.verdict.warnings,
        code="conflict",
    )
    return ObjectDecision(gang, verdict)


def _conflict(pod: KubeObject, decision: ObjectDecision, config: Config) -> ObjectDecision:
    gang = decision.gang
    role = gang.roles[0].name if gang.roles else ""
    plan = plan_pod(pod, PodMembership(gang, role), config, gang.namespace)
    if plan.outcome != "reject":
        return decision
    verdict = Verdict(
        allowed=False, reason=plan.message, warnings=decision.verdict.warnings, code="conflict"
    )
    return ObjectDecision(gang, verdict)
