"""The webhook's answers as pure functions: AdmissionReview dicts in, AdmissionReview out.

No server and no network: `parse_review` on bytes, `mutate`/`validate` on a `Policy`
built from plain Node dicts and a dict of owners. What a user (the API server) relies
on: the uid echoed, a JSONPatch that turns the pod into exactly the planned pod, a 403
with the numbers when a gang can never run, 4xx for broken bodies, and never an
exception out of these functions.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

import jsonpatch
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangkeeper.policies.admission.decision import decide_pod
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.model import KubeObject
from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.server import admission
from gangkeeper.webhook.server.admission import BadReview, Policy, parse_review

GPU = "nvidia.com/gpu"


def node(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {GPU: str(gpus)}, "capacity": {GPU: str(gpus)}},
    }


def job(name: str, parallelism: int, gpus: int, namespace: str = "team") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "trainer", "image": "trainer:1",
                         "resources": {"limits": {GPU: str(gpus)}}}
                    ],
                },
            },
        },
    }


def pod_of(owner: Mapping[str, Any], index: int = 0) -> dict[str, Any]:
    """A pod as the Job controller creates it: template + job labels + ownerReference."""
    template = copy.deepcopy(owner["spec"]["template"])
    name = owner["metadata"]["name"]
    metadata = template.get("metadata", {})
    metadata["generateName"] = f"{name}-{index}-"
    metadata["namespace"] = owner["metadata"]["namespace"]
    metadata.setdefault("labels", {}).update(
        {"batch.kubernetes.io/job-name": name, "job-name": name,
         "batch.kubernetes.io/job-completion-index": str(index)}
    )
    metadata["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": name,
         "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def review(
    obj: Mapping[str, Any] | None,
    *,
    operation: str = "CREATE",
    kind: tuple[str, str, str] = ("", "v1", "Pod"),
    namespace: str = "team",
    old: Mapping[str, Any] | None = None,
    dry_run: bool = False,
    uid: str = "705ab4f5-6393-11e8-b7cc-42010a800002",
    sub_resource: str | None = None,
) -> dict[str, Any]:
    group, version, kind_name = kind
    request: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind_name},
        "resource": {"group": group, "version": version, "resource": kind_name.lower() + "s"},
        "namespace": namespace,
        "operation": operation,
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
        "userInfo": {"username": "alice"},
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def as_review(data: Mapping[str, Any]) -> admission.Review:
    return parse_review(json.dumps(data).encode())


class Owners:
    def __init__(self, *objects: KubeObject) -> None:
        self.objects = {
            (o["apiVersion"], o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]): o
            for o in objects
        }

    def __call__(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return self.objects.get((api_version, kind, namespace, name))


def policy(*owners: KubeObject, nodes: tuple[int, ...] = (8, 8, 4), config: Config | None = None,
           busy: Mapping[str, int] | None = None) -> Policy:
    config = config or Config()
    capacity = Capacity.from_nodes([node(f"n{i}", g) for i, g in enumerate(nodes)], config)
    for i, (node_name, used) in enumerate((busy or {}).items()):
        capacity.add_pod(f"busy-{i}", node_name, {GPU: used})
    return Policy(capacity=capacity, lookup=Owners(*owners), config=config)


def decoded_patch(answer: admission.Answer) -> list[dict[str, Any]]:
    response = answer.review["response"]
    assert response["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


# --- parsing: broken bodies are 4xx with a message ------------------------------------

GOOD = review(pod_of(job("train", 2, 1)))


def _without(path: tuple[str, ...]) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    target = data
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return data


MALFORMED: list[tuple[str, bytes, int, str]] = [
    ("not json", b"{this is not json", 400, "not JSON"),
    ("a json list", b"[1, 2]", 400, "not an AdmissionReview"),
    ("a json string", b'"hello"', 400, "not an AdmissionReview"),
    ("v1beta1", json.dumps({**GOOD, "apiVersion": "admission.k8s.io/v1beta1"}).encode(), 400,
     "apiVersion='admission.k8s.io/v1beta1'"),
    ("another kind", json.dumps({**GOOD, "kind": "Pod"}).encode(), 400, "kind='Pod'"),
    ("no request", json.dumps(_without(("request",))).encode(), 400, "request is missing"),
    ("request not an object", json.dumps({**GOOD, "request": [1]}).encode(), 400,
     "request is missing or not an object"),
    ("no uid", json.dumps(_without(("request", "uid"))).encode(), 400, "request.uid"),
    ("empty uid", json.dumps({**GOOD, "request": {**GOOD["request"], "uid": ""}}).encode(), 400,
     "request.uid"),
    ("no operation", json.dumps(_without(("request", "operation"))).encode(), 400,
     "request.operation"),
    ("no kind", json.dumps(_without(("request", "kind"))).encode(), 400, "request.kind"),
    ("create without object", json.dumps(_without(("request", "object"))).encode(), 400,
     "request.object"),
    ("object is a string",
     json.dumps({**GOOD, "request": {**GOOD["request"], "object": "pod"}}).encode(), 400,
     "request.object"),
    ("namespace not a string",
     json.dumps({**GOOD, "request": {**GOOD["request"], "namespace": 7}}).encode(), 400,
     "request.namespace"),
    ("binary garbage", b"\xff\xfe\x00garbage", 400, "not JSON"),
]


@pytest.mark.parametrize(
    ("body", "status", "needle"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_a_broken_body_is_refused_with_a_status_and_a_message_naming_the_problem(
    body: bytes, status: int, needle: str
) -> None:
    with pytest.raises(BadReview) as caught:
        parse_review(body)
    assert caught.value.status == status
    assert needle in caught.value.message


def test_a_body_over_the_limit_is_refused_with_413() -> None:
    with pytest.raises(BadReview) as caught:
        parse_review(json.dumps(GOOD).encode(), max_bytes=100)
    assert caught.value.status == 413
    assert "100" in caught.value.message


def test_a_delete_without_object_is_a_valid_review() -> None:
    data = review(None, operation="DELETE", old=pod_of(job("train", 2, 1)))
    parsed = parse_review(json.dumps(data).encode())
    assert parsed.operation == "DELETE"


# --- mutation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "existing",
    [
        pytest.param({}, id="no labels, annotations or gates"),
        pytest.param({"labels": {"team": "vision"}}, id="user labels"),
        pytest.param({"annotations": {"note": "x"}}, id="user annotations"),
        pytest.param({"gates": [{"name": "example.com/quota"}]}, id="another scheduling gate"),
        pytest.param({"labels": {}, "annotations": {}, "gates": []}, id="empty maps and lists"),
    ],
)
def test_applying_the_patch_to_the_request_object_gives_exactly_the_planned_pod(
    existing: dict[str, Any],
) -> None:
    owner = job("train", 4, 2)
    pod = pod_of(owner)
    meta = pod["metadata"]
    # The ownerReference alone makes it a gang member; labels are what the case says.
    meta.pop("labels")
    if "labels" in existing:
        meta["labels"] = dict(existing["labels"])
    if "annotations" in existing:
        meta["annotations"] = dict(existing["annotations"])
    if "gates" in existing:
        pod["spec"]["schedulingGates"] = list(existing["gates"])
    request_object = copy.deepcopy(pod)
    pol = policy(owner)
    answer = admission.mutate(as_review(review(pod)), pol)
    planned = decide_pod(pod, namespace="team", capacity=pol.capacity, lookup=pol.lookup,
                         config=pol.config).patched
    assert planned is not None, "the fixture pod must be a gang member"
    assert answer.allowed
    assert jsonpatch.apply_patch(pod, decoded_patch(answer)) == planned
    assert pod == request_object, "the request object itself is not modified"


def test_the_patch_escapes_slashes_in_label_keys_as_rfc_6901_says() -> None:
    owner = job("train", 2, 1)
    pod = pod_of(owner)  # has labels, so gang labels are added key by key
    ops = decoded_patch(admission.mutate(as_review(review(pod)), policy(owner)))
    label_paths = [op["path"] for op in ops if op["path"].startswith("/metadata/labels/")]
    assert "/metadata/labels/gangkeeper.io~1gang" in label_paths
    assert all("/" not in p.removeprefix("/metadata/labels/") for p in label_paths)


def test_the_response_echoes_uid_api_version_and_kind() -> None:
    owner = job("train", 2, 1)
    answer = admission.mutate(as_review(review(pod_of(owner), uid="my-uid-1")), policy(owner))
    assert answer.review["apiVersion"] == "admission.k8s.io/v1"
    assert answer.review["kind"] == "AdmissionReview"
    assert answer.review["response"]["uid"] == "my-uid-1"


def test_a_pod_that_is_no_gang_is_allowed_without_patch_fields() -> None:
    lone = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "team"},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
    answer = admission.mutate(as_review(review(lone)), policy())
    response = answer.review["response"]
    assert response["allowed"] is True
    assert "patch" not in response
    assert "patchType" not in response


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
def test_other_pod_operations_are_allowed_untouched(operation: str) -> None:
    owner = job("huge", 9, 8)  # could never fit: would be rejected on CREATE
    pod = pod_of(owner)
    data = review(pod if operation != "DELETE" else None, operation=operation, old=pod)
    for answer in (admission.mutate(as_review(data), policy(owner)),
                   admission.validate(as_review(data), policy(owner))):
        assert answer.review["response"] == {"uid": data["request"]["uid"], "allowed": True}


def test_a_pod_sub_resource_is_allowed_untouched() -> None:
    owner = job("huge", 9, 8)
    data = review(pod_of(owner), sub_resource="status")
    answer = admission.validate(as_review(data), policy(owner))
    assert answer.review["response"]["allowed"] is True


# --- rejection ----------------------------------------------------------------------------


def test_a_gang_that_can_never_fit_is_denied_with_403_and_the_numbers() -> None:
    owner = job("huge", 3, 8)  # 24 GPUs on nodes of 8+8+4 = 20
    answer = admission.validate(as_review(review(owner, kind=("batch", "v1", "Job"))), policy())
    status = answer.review["response"]["status"]
    assert answer.review["response"]["allowed"] is False
    assert status["code"] == 403
    assert "24" in status["message"] and "20" in status["message"]
    assert answer.reason  # a reason code for the rejections metric


def test_a_pod_of_a_gang_that_can_never_fit_is_denied_by_both_webhooks() -> None:
    owner = job("huge", 3, 8)
    data = as_review(review(pod_of(owner)))
    for answer in (admission.mutate(data, policy(owner)), admission.validate(data, policy(owner))):
        assert answer.review["response"]["allowed"] is False
        assert "patch" not in answer.review["response"]


def test_a_dry_run_gets_the_same_answer_as_a_real_request() -> None:
    owner = job("huge", 3, 8)
    real = admission.validate(as_review(review(owner, kind=("batch", "v1", "Job"))), policy())
    dry = admission.validate(
        as_review(review(owner, kind=("batch", "v1", "Job"), dry_run=True)), policy()
    )
    assert dry.review == real.review


def test_a_workload_update_that_leaves_spec_alone_is_not_blocked() -> None:
    # The cluster shrank since the Job was admitted; removing a finalizer must still work.
    owner = job("huge", 3, 8)
    changed = copy.deepcopy(owner)
    changed["metadata"]["finalizers"] = []
    data = review(changed, operation="UPDATE", old=owner, kind=("batch", "v1", "Job"))
    assert admission.validate(as_review(data), policy()).allowed


def test_suspending_or_resuming_a_job_is_not_blocked() -> None:
    # gangkeeper's requeue resumes a Job it suspended: a cluster that shrank since must
    # not leave the Job suspended.
    owner = job("huge", 3, 8)
    owner["spec"]["suspend"] = True
    resumed = copy.deepcopy(owner)
    resumed["spec"]["suspend"] = False
    data = review(resumed, operation="UPDATE", old=owner, kind=("batch", "v1", "Job"))
    assert admission.validate(as_review(data), policy()).allowed
    del owner["spec"]["suspend"]
    data = review(resumed, operation="UPDATE", old=owner, kind=("batch", "v1", "Job"))
    assert admission.validate(as_review(data), policy()).allowed


def test_a_workload_update_that_grows_the_gang_is_checked() -> None:
    small, big = job("grow", 2, 8), job("grow", 3, 8)
    data = review(big, operation="UPDATE", old=small, kind=("batch", "v1", "Job"))
    assert not admission.validate(as_review(data), policy()).allowed


def test_an_object_being_deleted_is_not_blocked() -> None:
    owner = job("huge", 3, 8)
    owner["metadata"]["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    data = review(owner, operation="UPDATE", old=job("huge", 2, 8), kind=("batch", "v1", "Job"))
    assert admission.validate(as_review(data), policy()).allowed


def test_a_kind_no_recogniser_knows_is_allowed() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "team"}}
    answer = admission.validate(as_review(review(cm, kind=("", "v1", "ConfigMap"))), policy())
    assert answer.review["response"] == {"uid": GOOD["request"]["uid"], "allowed": True}


def test_the_namespace_of_the_request_names_the_gang_when_the_object_lacks_one() -> None:
    owner = job("huge", 3, 8)
    del owner["metadata"]["namespace"]
    answer = admission.validate(
        as_review(review(owner, kind=("batch", "v1", "Job"), namespace="research")), policy()
    )
    assert "research/" in answer.review["response"]["status"]["message"]


# --- warnings ---------------------------------------------------------------------------


def test_warnings_fit_the_api_servers_120_character_limit() -> None:
    # Fits the empty cluster but not what is free now: the policy warns.
    owner = job("later", 2, 8)
    pol = policy(owner, busy={"n0": 8, "n1": 4})
    answer = admission.validate(as_review(review(owner, kind=("batch", "v1", "Job"))), pol)
    warnings = answer.review["response"].get("warnings", [])
    assert answer.allowed
    assert warnings, "a gang that does not fit free capacity now gets a warning"
    assert all(len(w) <= admission.MAX_WARNING_CHARS and "\n" not in w for w in warnings)


# --- unreadable objects and internal errors ---------------------------------------------


def _fractional_gpu_job() -> dict[str, Any]:
    owner = job("odd", 2, 1)
    owner["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][GPU] = "1.5"
    return owner


@pytest.mark.parametrize(
    ("setting", "allowed"), [(None, True), ("allow", True), ("reject", False)]
)
def test_an_object_the_policy_cannot_read_is_answered_per_on_unreadable(
    setting: str | None, allowed: bool
) -> None:
    owner = _fractional_gpu_job()
    config = load_config({"onUnreadable": setting} if setting else None)
    answer = admission.validate(
        as_review(review(owner, kind=("batch", "v1", "Job"))), policy(owner, config=config)
    )
    response = answer.review["response"]
    assert response["allowed"] is allowed
    assert answer.outcome == "unreadable"
    if allowed:
        assert any("1.5" in w or "nvidia.com/gpu" in w for w in response["warnings"])
    else:
        assert response["status"]["code"] == 422
        assert "nvidia.com/gpu" in response["status"]["message"]


def test_an_unexpected_policy_failure_is_an_answer_not_an_exception() -> None:
    def broken_lookup(*_: str) -> KubeObject | None:
        raise RuntimeError("cache exploded")

    owner = job("train", 2, 1)
    pol = Policy(capacity=policy().capacity, lookup=broken_lookup, config=Config())
    answer = admission.mutate(as_review(review(pod_of(owner))), pol)
    assert answer.allowed  # default onUnreadable: allow, with a warning
    assert answer.outcome == "error"
    assert isinstance(answer.exception, RuntimeError)
    assert "cache exploded" not in json.dumps(answer.review), "internals stay in the log"


def test_the_noop_answer_allows_with_the_same_uid() -> None:
    answer = admission.noop(as_review(review(pod_of(job("x", 2, 1)), uid="n-1")))
    assert answer.review["response"] == {"uid": "n-1", "allowed": True}


def test_the_summary_for_the_log_never_carries_the_object() -> None:
    owner = job("train", 2, 1)
    pod = pod_of(owner)
    pod["spec"]["containers"][0]["env"] = [{"name": "TOKEN", "value": "s3cr3t"}]
    answer = admission.mutate(as_review(review(pod)), policy(owner))
    assert "s3cr3t" not in json.dumps(answer.summary)
    assert answer.summary["uid"] == GOOD["request"]["uid"]


@pytest.mark.parametrize("namespace", ["kube-system", "gangkeeper-system"])
def test_requests_in_never_matched_namespaces_are_allowed_untouched(namespace: str) -> None:
    owner = job("huge", 9, 8, namespace=namespace)  # would be denied anywhere else
    base = policy(owner)
    pol = Policy(capacity=base.capacity, lookup=base.lookup, config=base.config,
                 skip_namespaces=frozenset({"kube-system", "gangkeeper-system"}))
    pod_review = as_review(review(pod_of(owner), namespace=namespace))
    job_review = as_review(review(owner, kind=("batch", "v1", "Job"), namespace=namespace))
    for answer in (admission.mutate(pod_review, pol), admission.validate(pod_review, pol),
                   admission.validate(job_review, pol)):
        assert answer.review["response"] == {"uid": GOOD["request"]["uid"], "allowed": True}


# --- junk never escapes as an exception -----------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)
POD_KEYS = st.sampled_from(["metadata", "spec", "apiVersion", "kind"])
JUNK_POD = st.dictionaries(POD_KEYS, JSON, max_size=4).map(
    lambda d: {"apiVersion": "v1", "kind": "Pod", **d}
)
JUNK_JOB = st.dictionaries(POD_KEYS, JSON, max_size=4).map(
    lambda d: {"apiVersion": "batch/v1", "kind": "Job", **d}
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=JUNK_POD, workload=JUNK_JOB)
def test_junk_objects_get_an_answer_never_an_exception(
    pod: dict[str, Any], workload: dict[str, Any]
) -> None:
    pol = policy(job("train", 2, 1))
    for data, kind in ((pod, ("", "v1", "Pod")), (workload, ("batch", "v1", "Job"))):
        parsed = as_review(review(data, kind=kind))
        for answer in (admission.mutate(parsed, pol), admission.validate(parsed, pol)):
            json.dumps(answer.review)  # serialisable, as the app sends it
            assert answer.review["response"]["uid"] == GOOD["request"]["uid"]
            assert answer.outcome != "error", answer.exception


REQUEST_KEYS = st.sampled_from(["uid", "kind", "operation", "object", "namespace",
                                "subResource", "oldObject", "dryRun", "name"])


@settings(max_examples=200, deadline=None)
@given(
    raw=st.binary(max_size=64)
    | JSON.map(lambda v: json.dumps(v).encode())
    | st.dictionaries(REQUEST_KEYS, JSON, max_size=6).map(
        lambda r: json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                              "request": r}).encode()
    )
)
def test_any_body_is_either_refused_with_a_4xx_or_answered(raw: bytes) -> None:
    try:
        parsed = parse_review(raw)
    except BadReview as bad:
        assert 400 <= bad.status < 500 and bad.message
        return
    for answer in (admission.mutate(parsed, policy()), admission.validate(parsed, policy())):
        assert answer.review["response"]["uid"] == parsed.uid
        json.dumps(answer.review)




@pytest.mark.parametrize(("setting", "allowed"), [("allow", True), ("reject", False)])
def test_an_unknown_version_of_a_known_kind_is_answered_per_on_unreadable(
    setting: str, allowed: bool
) -> None:
    """A batch/v2 Job (or a future JobSet v1beta7) is not read as batch/v1."""
    owner = {**job("train", 8, 8), "apiVersion": "batch/v2"}
    config = load_config({"onUnreadable": setting})
    answer = admission.validate(
        as_review(review(owner, kind=("batch", "v2", "Job"))), policy(config=config)
    )
    response = answer.review["response"]
    assert response["allowed"] is allowed
    assert answer.outcome == "unreadable"
    text = " ".join(response.get("warnings", [])) + response.get("status", {}).get("message", "")
    assert "batch/v2 is not a version gangkeeper reads" in text


def test_a_pod_based_gang_is_summed_over_the_cached_siblings() -> None:
    """The mutating webhook sees the pod under review plus its siblings from the cache:
    with four 3-GPU members cached, a fifth on 8+8 GPUs is refused."""

    def member(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "team",
                "annotations": {"gangkeeper.io/gang-name": "g", "gangkeeper.io/min-member": "5"},
            },
            "spec": {"containers": [{"name": "c", "resources": {"limits": {GPU: "3"}}}]},
        }

    cached = [member(f"m{i}") for i in range(4)]
    base = policy(nodes=(8, 8))
    with_siblings = Policy(
        capacity=base.capacity,
        lookup=base.lookup,
        config=base.config,
        siblings=lambda ns, name: cached if (ns, name) == ("team", "g") else [],
    )
    fifth = as_review(review(member("m4")))
    refused = admission.mutate(fifth, with_siblings)
    assert not refused.allowed
    message = refused.review["response"]["status"]["message"]
    assert "all 5 members seen: 15 nvidia.com/gpu" in message
    alone = admission.mutate(fifth, base)
    assert alone.allowed
    assert any("at most 4 fit" in w for w in alone.review["response"]["warnings"])
