"""Hostile input against a real `gangkeeper serve` over TLS: the bounded CI run of bench.fuzz.

3,000 cases (`bench.fuzz_cases`: every field of every example kind and of the pods
their controllers make mutated, deep nesting, huge bodies, invalid UTF-8, wrong content
types, duplicate keys) over two keep-alive connections: every answer is a well-formed
2xx AdmissionReview or a 4xx, never a 5xx or a dropped connection, and the unmodified
reviews get the same answers throughout. `python -m bench.fuzz --cases 100000` is the
full run. The judge itself is checked on answers that must fail it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from builders.reviews import admission_review, pods_for
from http_support import Served, example_documents, example_files

from bench.fuzz import Reply, judge, run
from bench.fuzz_cases import STRATEGIES, Case, Cases, Seed, example_seeds

CASES = 3000


def _builder_seeds() -> list[Seed]:
    """The pods tests/builders makes (labels and owners as each controller sets them)."""
    seeds = []
    for path in example_files():
        docs = example_documents(path)
        for doc in docs:
            for pod in pods_for(doc, docs):
                seeds.append(Seed("mutate", admission_review(pod), f"{path.stem}:builder-pod"))
    return seeds


def test_every_strategy_and_every_field_of_every_kind_is_generated() -> None:
    cases = Cases(14, example_seeds() + _builder_seeds())
    kinds = {s.review["request"]["kind"]["kind"] for s in cases.seeds}
    assert {"Pod", "Job", "JobSet", "TrainJob", "PyTorchJob", "MPIJob", "LeaderWorkerSet",
            "PodGroup"} <= kinds
    drawn = [cases.case(i) for i in range(CASES)]
    assert {c.strategy for c in drawn} == set(STRATEGIES)
    # Every third case walks the fields in order; 3,000 cases reach this many of them.
    assert len({c.what for c in drawn if c.strategy == "field"}) >= CASES // 3 * 0.9


def test_a_case_is_the_same_every_time_it_is_drawn() -> None:
    first, again = Cases(7).case(1234), Cases(7).case(1234)
    assert (first.body, first.headers, first.what) == (again.body, again.headers, again.what)


def test_the_server_survives_thousands_of_hostile_requests(
    start_server: Callable[..., Served],
) -> None:
    served = start_server()
    row = run(CASES, seed=14, url=served.url, ca=served.ca, workers=2,
              seeds=example_seeds() + _builder_seeds())
    assert row["cases"] == CASES
    assert row["failures"] == [], "\n".join(row["failures"])
    assert row["server_errors"] == row["dropped"] == row["bad_answers"] == 0
    assert row["good_checks"] >= 2 and row["good_answer_changed"] == 0
    statuses = row["status"]
    assert set(statuses) <= {"200", "400", "408", "413", "415", "422"}, statuses
    assert statuses["200"] > CASES // 2 and statuses["400"] > 0 and statuses["413"] > 0
    assert served.process.poll() is None


_CASE = Case(0, "good", "validate",
             json.dumps({"request": {"uid": "u-1"}}).encode(), "a test case")


def _answer(response: dict[str, Any], status: int = 200, **top: Any) -> Reply:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response, **top}
    return Reply(status, {}, json.dumps(body).encode())


@pytest.mark.parametrize(
    ("reply", "needle"),
    [
        pytest.param(Reply(500, {}, b"Internal Server Error"), "HTTP 500", id="a 500"),
        pytest.param(Reply(200, {}, b"ok"), "without an AdmissionReview", id="not JSON"),
        pytest.param(_answer({"uid": "other", "allowed": True}), "uid", id="wrong uid"),
        pytest.param(_answer({"uid": "u-1", "allowed": "yes"}), "allowed", id="allowed a str"),
        pytest.param(_answer({"uid": "u-1", "allowed": False}), "without a message",
                     id="denied without a message"),
        pytest.param(_answer({"uid": "u-1", "allowed": True, "patchType": "JSONPatch",
                              "patch": base64.b64encode(b"{}").decode()}), "patch",
                     id="patch not a list"),
        pytest.param(_answer({"uid": "u-1", "allowed": True}, apiVersion="v1"),
                     "AdmissionReview", id="wrong apiVersion"),
    ],
)
def test_the_judge_fails_a_bad_answer(reply: Reply, needle: str) -> None:
    problem = judge(_CASE, reply)
    assert problem is not None and needle in problem


def test_the_judge_passes_a_denial_with_a_message_and_any_4xx() -> None:
    denial = _answer({"uid": "u-1", "allowed": False,
                      "status": {"code": 403, "message": "gang needs 8 GPUs"}})
    assert judge(_CASE, denial) is None
    assert judge(_CASE, Reply(413, {}, b"")) is None
