"""`gangkeeper serve` answering AdmissionReviews over real TLS, as the API server calls it.

Every example in examples/ goes through /validate (its file name says the verdict the
sample fleet must give: `*-fits.yaml` admitted, `*-too-big.yaml` rejected) and the pods
its controller would create go through /mutate; the returned patch is applied and the
patched pod sent back through /validate and /mutate. Plus dry-run, warnings, every
malformed body, health, readiness, metrics and the request log.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest
from builders.reviews import admission_review, children_for, pods_for
from http_support import EXAMPLES, FLEET, Served, example_documents, example_files

from gangkeeper.policies.admission.decision import decide_pod, validate_object
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.files.manifests import load_nodes

FITS = [p for p in example_files() if p.name.endswith("-fits.yaml")]
TOO_BIG = [p for p in example_files() if p.name.endswith("-too-big.yaml")]
WORKLOADS_WITH_PODS = [
    p for p in example_files() if any(pods_for(d, example_documents(p))
                                       for d in example_documents(p))
]
GANG_KEYS = ("gangkeeper.io/gang", "gangkeeper.io/role")


def post(client: httpx.Client, endpoint: str, review: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/{endpoint}", json=review)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == review["request"]["uid"]
    return body["response"]


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in response:
        assert "patchType" not in response
        return []
    assert response["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


CONFIG = Config()
CAPACITY = Capacity.from_nodes(load_nodes(FLEET), CONFIG)


def library_lookup(docs: list[dict[str, Any]]) -> Any:
    """An owner lookup over one example file and what its controllers create."""
    known = docs + [child for doc in docs for child in children_for(doc)]

    def lookup(api_version: str, kind: str, namespace: str, name: str) -> Any:
        return next((d for d in known if d.get("kind") == kind
                     and d["metadata"]["name"] == name), None)

    return lookup


def gang_names(path: Path) -> set[str]:
    """What the policy library calls the gangs of a file: the server must agree."""
    docs = example_documents(path)
    lookup = library_lookup(docs)
    return {
        d.gang.name for doc in docs
        for d in validate_object(doc, capacity=CAPACITY, lookup=lookup, config=CONFIG)
    }


def planned(pod: dict[str, Any], docs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pod as the policy library plans it (the patch must produce exactly this).

    A pod sent without metadata.namespace is planned with the request's namespace
    filled in; the API server sets that field itself, so the patch leaves it out.
    """
    namespace = pod["metadata"].get("namespace")
    decision = decide_pod(pod, namespace=namespace or "default", capacity=CAPACITY,
                          lookup=library_lookup(docs), config=CONFIG)
    if decision.patched is not None and not namespace:
        del decision.patched["metadata"]["namespace"]
    return decision.patched


# --- every example through /validate ----------------------------------------------------


def test_the_examples_cover_fitting_and_impossible_gangs() -> None:
    assert len(FITS) >= 3 and len(TOO_BIG) >= 3


@pytest.mark.parametrize("path", FITS, ids=lambda p: p.name)
def test_a_fitting_example_is_admitted_by_validate(client: httpx.Client, path: Path) -> None:
    for doc in example_documents(path):
        response = post(client, "validate", admission_review(doc))
        assert response["allowed"] is True, response
        assert all(len(w) <= 120 for w in response.get("warnings", []))


@pytest.mark.parametrize("path", TOO_BIG, ids=lambda p: p.name)
def test_an_impossible_example_is_denied_with_403_and_the_numbers(
    client: httpx.Client, path: Path
) -> None:
    answers = [post(client, "validate", admission_review(doc))
               for doc in example_documents(path)]
    denied = [a for a in answers if not a["allowed"]]
    assert denied, f"{path.name}: nothing was denied"
    for answer in denied:
        status = answer["status"]
        assert status["code"] == 403
        assert len(re.findall(r"\d+", status["message"])) >= 2, status["message"]
        assert any(name in status["message"] for name in gang_names(path))


@pytest.mark.parametrize("path", TOO_BIG[:2], ids=lambda p: p.name)
def test_a_dry_run_gets_the_same_answer(client: httpx.Client, path: Path) -> None:
    for doc in example_documents(path):
        real = post(client, "validate", admission_review(doc, uid="same-uid"))
        dry = post(client, "validate", admission_review(doc, uid="same-uid", dry_run=True))
        assert dry == real


# --- pods from every example's templates through /mutate --------------------------------


@pytest.mark.parametrize("path", [p for p in WORKLOADS_WITH_PODS if p in FITS],
                         ids=lambda p: p.name)
def test_pods_of_a_fitting_example_are_gang_keyed_and_the_patched_pod_validates(
    client: httpx.Client, path: Path
) -> None:
    docs = example_documents(path)
    expected_gangs = gang_names(path)
    pods = [pod for doc in docs for pod in pods_for(doc, docs)]
    assert pods
    for pod in pods:
        response = post(client, "mutate", admission_review(pod))
        assert response["allowed"] is True, response
        ops = patch_of(response)
        assert ops, f"{path.name}: a gang pod got no patch"
        patched = jsonpatch.apply_patch(pod, ops)
        assert patched == planned(pod, docs)
        labels = patched["metadata"]["labels"]
        assert all(key in labels for key in GANG_KEYS)
        assert patched["metadata"]["annotations"]["gangkeeper.io/gang-name"] in expected_gangs
        gates = [g["name"] for g in patched["spec"]["schedulingGates"]]
        assert gates.count("gangkeeper.io/gang") == 1
        # What the user had stays: the patch only adds.
        assert {k: v for k, v in labels.items() if k in pod["metadata"].get("labels", {})} == (
            pod["metadata"].get("labels", {})
        )
        # The mutated pod passes validation, and a second mutation adds nothing.
        assert post(client, "validate", admission_review(patched))["allowed"] is True
        again = post(client, "mutate", admission_review(patched))
        assert again["allowed"] is True and patch_of(again) == []


@pytest.mark.parametrize("path", [p for p in WORKLOADS_WITH_PODS if p in TOO_BIG],
                         ids=lambda p: p.name)
def test_pods_of_an_impossible_example_are_denied_by_mutate_and_validate(
    client: httpx.Client, path: Path
) -> None:
    docs = example_documents(path)
    pods = [pod for doc in docs for pod in pods_for(doc, docs)]
    for endpoint in ("mutate", "validate"):
        answers = [post(client, endpoint, admission_review(pod)) for pod in pods]
        denied = [a for a in answers if not a["allowed"]]
        assert denied, f"{path.name}: no pod was denied by /{endpoint}"
        assert all("patch" not in a for a in denied)
        assert all(re.search(r"\d", a["status"]["message"]) for a in denied)


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
def test_pod_operations_other_than_create_are_allowed_untouched(
    client: httpx.Client, operation: str
) -> None:
    path = TOO_BIG[0]
    docs = example_documents(path)
    pod = next(pod for doc in docs for pod in pods_for(doc, docs))
    review = admission_review(None if operation == "DELETE" else pod, operation=operation,
                              old=pod)
    for endpoint in ("mutate", "validate"):
        assert post(client, endpoint, review) == {"uid": review["request"]["uid"],
                                                  "allowed": True}


# --- warnings and unreadable objects ------------------------------------------------------


def test_an_unreadable_object_is_allowed_with_a_short_warning(client: httpx.Client) -> None:
    broken = example_documents(EXAMPLES / "job-fits.yaml")[0]
    broken["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "1.5"}
    }
    response = post(client, "validate", admission_review(broken))
    assert response["allowed"] is True
    warnings = response["warnings"]
    assert warnings and all(len(w) <= 120 for w in warnings)
    assert any("gangkeeper" in w for w in warnings)


# --- malformed bodies: 4xx with a message, never a 500 ----------------------------------

_GOOD = admission_review({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "p", "namespace": "default"},
                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}})


def _drop(*path: str) -> bytes:
    data = json.loads(json.dumps(_GOOD))
    target = data
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return json.dumps(data).encode()


MALFORMED = [
    ("empty body", b"", 400, "not JSON"),
    ("not json", b"<xml/>", 400, "not JSON"),
    ("a json array", b"[]", 400, "not an AdmissionReview"),
    ("another kind", json.dumps({**_GOOD, "kind": "Status"}).encode(), 400, "AdmissionReview"),
    ("v1beta1", json.dumps({**_GOOD, "apiVersion": "admission.k8s.io/v1beta1"}).encode(), 400,
     "v1beta1"),
    ("no request", _drop("request"), 400, "request"),
    ("no uid", _drop("request", "uid"), 400, "request.uid"),
    ("no object", _drop("request", "object"), 400, "request.object"),
    ("no kind", _drop("request", "kind"), 400, "request.kind"),
    # Python's JSON parser raised RecursionError on these, which was a 500 (issue 14).
    ("deeply nested objects", b'{"a":' * 5000 + b"1" + b"}" * 5000, 400, "nests too deeply"),
    ("deeply nested lists", b"[" * 100_000 + b"]" * 100_000, 400, "nests too deeply"),
    ("nested deep inside a review",
     json.dumps(_GOOD).replace('"dryRun": false', '"dryRun": ' + "[" * 2000 + "]" * 2000)
     .encode(), 400, "nests too deeply"),
]


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
@pytest.mark.parametrize(("body", "status", "needle"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_a_malformed_body_gets_a_4xx_saying_what_is_wrong(
    client: httpx.Client, endpoint: str, body: bytes, status: int, needle: str
) -> None:
    response = client.post(f"/{endpoint}", content=body,
                           headers={"content-type": "application/json"})
    assert response.status_code == status
    assert needle in response.json()["error"]


def test_a_uid_with_a_lone_surrogate_is_echoed_escaped_not_a_500(client: httpx.Client) -> None:
    # `"\ud800"` is valid JSON but has no UTF-8 form: echoing it raised UnicodeEncodeError.
    body = json.dumps(_GOOD).replace(_GOOD["request"]["uid"], "\\ud800").encode()
    response = client.post("/validate", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.json()["response"]["uid"] == "\ud800"


def test_a_body_over_the_size_limit_is_refused_with_413(client: httpx.Client) -> None:
    big = json.dumps({**_GOOD, "padding": "x" * (4 * 1024 * 1024)}).encode()
    response = client.post("/validate", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "limit" in response.json()["error"]


def test_the_server_still_answers_after_every_bad_request(client: httpx.Client) -> None:
    for _, body, _, _ in MALFORMED:
        client.post("/mutate", content=body)
    assert post(client, "validate", _GOOD)["allowed"] is True


def test_the_admission_endpoints_take_only_post(client: httpx.Client) -> None:
    assert client.get("/mutate").status_code == 405


def test_the_benchmark_noop_endpoint_is_off_by_default(client: httpx.Client) -> None:
    assert client.post("/noop", json=_GOOD).status_code == 404


# --- health, readiness, metrics, logs ---------------------------------------------------


def test_healthz_and_readyz_report_a_ready_server(client: httpx.Client) -> None:
    assert client.get("/healthz").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"ready": True}


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_metrics_count_admissions_by_endpoint_verdict_outcome_and_reason(
    client: httpx.Client,
) -> None:
    before = _samples(client.get("/metrics").text)
    doc = example_documents(EXAMPLES / "job-too-big.yaml")[0]
    post(client, "validate", admission_review(doc))
    client.post("/validate", content=b"nope")
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    after = _samples(response.text)

    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    count = 'gangkeeper_admission_duration_seconds_count{endpoint="validate",verdict="reject"}'
    assert delta(count) == 1
    inf = ('gangkeeper_admission_duration_seconds_bucket'
           '{endpoint="validate",verdict="reject",le="+Inf"}')
    assert after[inf] == after[count]
    assert delta('gangkeeper_admission_requests_total{endpoint="validate",outcome="rejected"}') == 1
    assert delta(
        'gangkeeper_admission_requests_total{endpoint="validate",outcome="bad-request"}') == 1
    rejections = [k for k in after if k.startswith("gangkeeper_admission_rejections_total")]
    assert sum(delta(k) for k in rejections) == 1


def test_metrics_expose_the_certificate_expiry(client: httpx.Client, served: Served) -> None:
    from gangkeeper.certs import certificate_not_after

    samples = _samples(client.get("/metrics").text)
    expiry = samples["gangkeeper_certificate_expiry_timestamp_seconds"]
    assert expiry == certificate_not_after(served.cert_dir / "tls.crt").timestamp()


def test_each_admission_is_one_json_log_line_with_the_uid_and_never_the_object(
    client: httpx.Client, served: Served
) -> None:
    pod = json.loads(json.dumps(_GOOD["request"]["object"]))
    pod["spec"]["containers"][0]["env"] = [{"name": "API_TOKEN", "value": "hunter2-secret"}]
    review = admission_review(pod, uid="log-test-uid-42")
    post(client, "mutate", review)
    lines = [json.loads(line) for line in served.log_lines() if "log-test-uid-42" in line]
    assert len(lines) == 1
    assert lines[0]["uid"] == "log-test-uid-42" and lines[0]["endpoint"] == "mutate"
    assert "hunter2-secret" not in served.log.read_text()
