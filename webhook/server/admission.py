"""AdmissionReview in, AdmissionReview out: the webhook's answer as a pure function.

`parse_review(body)` checks the bytes the API server sent and returns a `Review`, or
raises `BadReview` (an HTTP status and a message saying what was wrong). `mutate`,
`validate` and `noop` turn a `Review` into an `Answer`: the response AdmissionReview
plus what the app needs for metrics and its log line. They call the policy core
(`gangkeeper.policies.admission.decision`) with the capacity, owner lookup and config the caller
gives them, and never raise: a broken request is the caller's 4xx (`BadReview`), a bad
object is an answer (`allowed: false` with a status, or allowed with a warning, per
`config.on_unreadable`).

What is checked where:
  /mutate   Pod CREATE: gang keys patched in (JSONPatch); denied when it can never run
            or (per `config.on_conflict`) carries another gang system's keys.
  /validate Pod CREATE: the feasibility verdict of its gang. Workload objects on CREATE,
            and on UPDATE when `spec` changed (a metadata-only update, e.g. a finalizer
            being removed, or a Job suspended or resumed, must never be blocked
            because the cluster shrank since).
  anything else (other operations, sub-resources, kinds no recogniser knows) is
  allowed untouched. dryRun requests get exactly the same answer: nothing here writes.

No HTTP, no I/O, no logging: the app does those.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, TypeVar

from gangkeeper.policies.admission.decision import (
    NEVER_NAMESPACES,
    Memos,
    PodDecision,
    decide_pod,
    validate_object,
)
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.errors import BadReview as BadReview
from gangkeeper.policies.errors import OwnerNotCached, PolicyError
from gangkeeper.policies.fit.warning_text import MAX_WARNING, fit_warning
from gangkeeper.policies.model import OwnerLookup, PodsLookup, Verdict
from gangkeeper.policies.settings.config import Config

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
#: The API server caps a request body at 3 MiB; an AdmissionReview carrying object and
#: oldObject of a maximal (1.5 MiB) object fits. Anything larger is not from it.
MAX_BODY_BYTES = 3 * 1024 * 1024
#: The API server keeps warnings readable by limiting them to 120 characters.
MAX_WARNING_CHARS = MAX_WARNING

# One encoder for every patch: json.dumps with non-default separators builds a new
# JSONEncoder (and its C encoder) on each call.
_PATCH_JSON = json.JSONEncoder(separators=(",", ":"))

Endpoint = Literal["mutate", "validate", "noop"]


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class AdmissionRequest(TypedDict, total=False):
    uid: str
    kind: GroupVersionKind
    resource: Mapping[str, str]
    subResource: str
    name: str
    namespace: str
    operation: str
    object: Mapping[str, Any] | None
    oldObject: Mapping[str, Any] | None
    dryRun: bool


@dataclass(frozen=True)
class Review:
    """A checked AdmissionReview request."""

    api_version: str
    request: AdmissionRequest

    @property
    def uid(self) -> str:
        return self.request["uid"]

    @property
    def operation(self) -> str:
        return self.request["operation"]

    @property
    def kind(self) -> GroupVersionKind:
        return self.request["kind"]

    @property
    def namespace(self) -> str:
        return self.request.get("namespace") or ""

    @property
    def object(self) -> Mapping[str, Any] | None:
        return self.request.get("object")

    @property
    def is_pod(self) -> bool:
        kind = self.kind
        return kind["group"] == "" and kind["kind"] == "Pod" and not self.request.get("subResource")


class ClaimDevices(Protocol):
    """Pods' and pod templates' ResourceClaims as device limits (`kube.device_view`)."""

    def with_claims(self, obj: Mapping[str, Any], namespace: str
                    ) -> tuple[Mapping[str, Any], tuple[str, ...]]: ...


@dataclass(frozen=True)
class Policy:
    """What a decision needs from the server: cluster state and config."""

    capacity: Capacity
    lookup: OwnerLookup
    config: Config
    #: What the server remembers between decisions (None: every one computed afresh).
    memos: Memos | None = None
    #: Requests in these namespaces are allowed untouched. The webhook configurations
    #: already exclude them; this is the second lock, because a gated gangkeeper pod in
    #: its own namespace would wait for a controller that cannot start.
    skip_namespaces: frozenset[str] = NEVER_NAMESPACES
    #: Cached pods of pod-based gangs, so such a gang is summed over its members.
    siblings: PodsLookup | None = None
    #: How a user gives gangkeeper an owner it could not read ("--owners FILE" when
    #: serving offline); "" where owners are watched.
    owners_hint: str = ""
    #: Claims as device limits for both webhooks (`kube.device_view.DeviceView`); the
    #: lookup's owners already ask theirs (`DeviceView.owners`).
    devices: ClaimDevices | None = None


@dataclass(frozen=True)
class Answer:
    """The response AdmissionReview and a summary for metrics and logs."""

    review: dict[str, Any]
    #: "allow" or "reject" (the histogram's verdict label).
    verdict: str
    #: What happened: "patched", "allowed", "rejected", "ignored", "unreadable", "error".
    outcome: str
    #: Machine-readable rejection cause (Verdict.code, "unreadable"); empty when allowed.
    reason: str = ""
    #: Fields for the request's log line (never the object itself).
    summary: dict[str, Any] = field(default_factory=dict)
    #: An unexpected exception from the policy, answered per config; the app logs it.
    exception: BaseException | None = None

    @property
    def allowed(self) -> bool:
        return bool(self.review["response"]["allowed"])


# --- parsing ---------------------------------------------------------------------------


def _require_str(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key)
    if not isinstance(value, str) or not value:
        raise BadReview(400, f"request.{key} is missing or not a non-empty string")
    return value


def parse_review(body: bytes, *, max_bytes: int = MAX_BODY_BYTES) -> Review:
    """Check an AdmissionReview body; BadReview says what is wrong with it."""
    if len(body) > max_bytes:
        raise BadReview(413, f"body of {len(body)} bytes is over the limit of {max_bytes}")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadReview(400, f"body is not JSON: {exc}") from None
    except RecursionError:
        # Python's parser recurses once per level; no AdmissionReview nests this deep.
        raise BadReview(400, "body is not usable JSON: it nests too deeply") from None
    if not isinstance(data, dict):
        raise BadReview(400, f"body is a JSON {type(data).__name__}, not an AdmissionReview")
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if kind != KIND or api_version != API_VERSION:
        raise BadReview(
            400,
            f"not an {API_VERSION} {KIND} (apiVersion={api_version!r}, kind={kind!r})",
        )
    request = data.get("request")
    if not isinstance(request, dict):
        raise BadReview(400, "request is missing or not an object")
    _require_str(request, "uid")
    operation = _require_str(request, "operation")
    gvk = request.get("kind")
    if not (
        isinstance(gvk, dict)
        and isinstance(gvk.get("kind"), str)
        and isinstance(gvk.get("group", ""), str)
        and isinstance(gvk.get("version", ""), str)
    ):
        raise BadReview(400, "request.kind is missing or not a {group, version, kind} object")
    gvk.setdefault("group", "")
    gvk.setdefault("version", "")
    obj = request.get("object")
    if operation in ("CREATE", "UPDATE") and not isinstance(obj, dict):
        raise BadReview(400, f"request.object is missing or not an object ({operation} needs one)")
    for key in ("namespace", "subResource", "name"):
        if request.get(key) is not None and not isinstance(request[key], str):
            raise BadReview(400, f"request.{key} must be a string")
    return Review(api_version=api_version, request=request)  # type: ignore[arg-type]


# --- answers ---------------------------------------------------------------------------


def _warning(text: str) -> str:
    # One line each: the API server passes warnings on as HTTP headers.
    return fit_warning(text, MAX_WARNING_CHARS)


def _warnings(texts: list[str] | tuple[str, ...]) -> list[str]:
    seen: dict[str, None] = {}
    for text in texts:
        if text.strip():
            seen.setdefault(_warning(text), None)
    return list(seen)


def _response(
    review: Review,
    *,
    allowed: bool,
    message: str = "",
    code: int = 403,
    warnings: list[str] | None = None,
    patch: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": review.uid, "allowed": allowed}
    if not allowed:
        response["status"] = {
            "status": "Failure",
            "code": code,
            "reason": "Forbidden" if code == 403 else "Invalid",
            "message": message,
        }
    if warnings:
        response["warnings"] = warnings
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(_PATCH_JSON.encode(patch).encode()).decode()
    return {"apiVersion": review.api_version, "kind": KIND, "response": response}


def _summary(review: Review, endpoint: Endpoint) -> dict[str, Any]:
    obj = review.object or review.request.get("oldObject") or {}
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    return {
        "uid": review.uid,
        "endpoint": endpoint,
        "operation": review.operation,
        "kind": review.kind["kind"],
        "namespace": review.namespace,
        "object": review.request.get("name") or meta.get("name") or meta.get("generateName") or "",
        "dry_run": bool(review.request.get("dryRun")),
    }


def _ignored(review: Review, summary: dict[str, Any]) -> Answer:
    return Answer(_response(review, allowed=True), "allow", "ignored", summary=summary)


_T = TypeVar("_T")


def _judged(
    call: Callable[[], _T], review: Review, summary: dict[str, Any], config: Config
) -> _T | Answer:
    """`call`'s decision, or the answer `config.on_unreadable` gives when it fails: an
    object the policy cannot read is never a 500. An owner not cached yet is raised:
    it is decided again off the event loop, with the owner fetched (`app._admit`)."""
    try:
        return call()
    except OwnerNotCached:
        raise
    except Exception as exc:
        return _unreadable(review, summary, config, exc)


def _unreadable(
    review: Review, summary: dict[str, Any], config: Config, error: BaseException
) -> Answer:
    """An object the policy cannot read, answered per `config.on_unreadable`."""
    internal = not isinstance(error, PolicyError)
    what = "internal error" if internal else str(error)
    outcome = "error" if internal else "unreadable"
    summary = {**summary, "error": what}
    exception = error if internal else None
    if config.on_unreadable == "reject":
        message = f"gangkeeper cannot check this object: {what}"
        return Answer(
            _response(review, allowed=False, message=message, code=422),
            "reject", outcome, "unreadable", summary, exception,
        )
    warning = _warning(f"gangkeeper: not checked ({what})")
    return Answer(
        _response(review, allowed=True, warnings=[warning]),
        "allow", outcome, "", summary, exception,
    )


def _with_namespace(obj: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
    """The object with metadata.namespace set from the request when it is absent.

    The API server fills it in before admission for most clients, not for every path;
    recognisers name gangs `namespace/name`, so give them the request's namespace.
    """
    meta = obj.get("metadata")
    if not namespace or (isinstance(meta, Mapping) and meta.get("namespace")):
        return obj
    new_meta = dict(meta) if isinstance(meta, Mapping) else {}
    new_meta["namespace"] = namespace
    return {**obj, "metadata": new_meta}


def _pod_answer(review: Review, policy: Policy) -> Answer:
    """Recognise, check and plan a pod; the plan becomes a JSONPatch."""
    summary = _summary(review, "mutate")
    pod = review.object
    assert pod is not None  # parse_review guarantees an object on CREATE
    device_notes: tuple[str, ...] = ()
    if policy.devices is not None:
        # Safe to plan against: the patch is built from the plan's own keys (labels,
        # annotations, gates), never from a diff that would carry these limits.
        pod, device_notes = policy.devices.with_claims(pod, review.namespace)
    decision = _judged(
        lambda: decide_pod(
            pod, namespace=review.namespace, capacity=policy.capacity, lookup=policy.lookup,
            config=policy.config, memos=policy.memos, siblings=policy.siblings,
        ),
        review, summary, policy.config,
    )
    if isinstance(decision, Answer):
        return decision
    if decision.membership is not None:
        gang = decision.membership.gang
        summary["gang"] = f"{gang.namespace}/{gang.name}"
        summary["role"] = decision.membership.role
    if decision.skipped:
        summary["skipped"] = decision.skipped
    verdict: Verdict = decision.verdict
    warnings = _warnings(
        (*device_notes, *verdict.warnings, _unread_warning(decision, pod, policy)))
    if not verdict.allowed:
        summary["reason"] = verdict.code
        return Answer(
            _response(review, allowed=False, message=verdict.reason, warnings=warnings),
            "reject", "rejected", verdict.code or "rejected", summary,
        )
    # Planned against the pod with metadata.namespace filled from the request, so the
    # patch never touches the namespace.
    patch = decision.patch
    summary["patch_ops"] = len(patch)
    return Answer(
        _response(review, allowed=True, warnings=warnings, patch=patch),
        "allow", "patched" if patch else "allowed", summary=summary,
    )


def _unread_warning(decision: PodDecision, pod: Mapping[str, Any], policy: Policy) -> str:
    """Why a GPU pod of an owner gangkeeper could not read was let through; ""."""
    owner = decision.unread_owner
    if not owner:
        return ""
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or meta.get("generateName") or "this pod"
    if policy.owners_hint:
        # What to do first: the API server may show only the start of a warning.
        return (
            f"give {owner} with {policy.owners_hint}: gangkeeper cannot read it, "
            f"so pod {name} went unchecked"
        )
    return f"gangkeeper cannot read {owner}, the owner of pod {name}; let through unchecked"


def _spec_unchanged(review: Review) -> bool:
    """The spec is the same but perhaps for `suspend`: suspending or resuming a Job
    (gangkeeper's requeue, Kueue, a user) never changes what its gang needs."""
    old, new = review.request.get("oldObject"), review.object
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return False

    def shape(obj: Mapping[str, Any]) -> object:
        spec = obj.get("spec")
        return {k: v for k, v in spec.items() if k != "suspend"} if isinstance(
            spec, Mapping
        ) else spec

    return shape(old) == shape(new)


def _object_answer(review: Review, policy: Policy) -> Answer:
    """The verdict on every gang of the object (a pod: its own gang); no patch."""
    summary = _summary(review, "validate")
    obj = review.object
    assert obj is not None  # parse_review guarantees an object on CREATE/UPDATE
    obj = _with_namespace(obj, review.namespace)
    device_notes: tuple[str, ...] = ()
    if policy.devices is not None:
        obj, device_notes = policy.devices.with_claims(obj, review.namespace)
    checked = obj  # as read now: the lambda below is called at once
    decisions = _judged(
        lambda: validate_object(
            checked, capacity=policy.capacity, lookup=policy.lookup, config=policy.config,
            memos=policy.memos, siblings=policy.siblings,
        ),
        review, summary, policy.config,
    )
    if isinstance(decisions, Answer):
        return decisions
    summary["gangs"] = [f"{d.gang.namespace}/{d.gang.name}" for d in decisions]
    rejected = [d for d in decisions if not d.verdict.allowed]
    warnings = _warnings([*device_notes, *(w for d in decisions for w in d.verdict.warnings)])
    if rejected:
        codes = sorted({d.verdict.code or "rejected" for d in rejected})
        summary["reason"] = ",".join(codes)
        message = "; ".join(d.verdict.reason for d in rejected)
        return Answer(
            _response(review, allowed=False, message=message, warnings=warnings),
            "reject", "rejected", codes[0], summary,
        )
    outcome = "allowed" if decisions else "ignored"
    return Answer(_response(review, allowed=True, warnings=warnings), "allow", outcome,
                  summary=summary)


def mutate(review: Review, policy: Policy) -> Answer:
    """The mutating webhook's answer: gang keys for a pod on CREATE, else untouched."""
    if review.namespace in policy.skip_namespaces:
        return _ignored(review, _summary(review, "mutate"))
    if review.is_pod and review.operation == "CREATE":
        return _pod_answer(review, policy)
    return _ignored(review, _summary(review, "mutate"))


def validate(review: Review, policy: Policy) -> Answer:
    """The validating webhook's answer for pods (CREATE) and workloads (CREATE/UPDATE)."""
    if review.namespace in policy.skip_namespaces:
        return _ignored(review, _summary(review, "validate"))
    if review.is_pod:
        if review.operation == "CREATE":
            # Only the verdict matters here: validate_object skips planning the mutation.
            return _object_answer(review, policy)
        return _ignored(review, _summary(review, "validate"))
    obj = review.object
    deleting = isinstance(obj, Mapping) and bool(
        isinstance(obj.get("metadata"), Mapping) and obj["metadata"].get("deletionTimestamp")
    )
    if (
        review.request.get("subResource")
        or review.operation not in ("CREATE", "UPDATE")
        or deleting
        or (review.operation == "UPDATE" and _spec_unchanged(review))
    ):
        return _ignored(review, _summary(review, "validate"))
    return _object_answer(review, policy)


def noop(review: Review) -> Answer:
    """Allow without looking: the benchmark's floor on the same parsing and serving path."""
    return _ignored(review, _summary(review, "noop"))


def answer(endpoint: Endpoint, review: Review, policy: Policy) -> Answer:
    if endpoint == "mutate":
        return mutate(review, policy)
    if endpoint == "validate":
        return validate(review, policy)
    return noop(review)
