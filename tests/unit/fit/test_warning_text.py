"""Admission warnings stay within the API server's 120 characters and, when shortened,
keep whole words (they end in " …", never in `jobse…`), whatever the policy says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders.reviews import children_for, pods_for

from gangkeeper.policies.admission.decision import decide_pod, validate_object
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.errors import PolicyError
from gangkeeper.policies.fit.warning_text import ELLIPSIS, MAX_WARNING, fit_warning
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.files.manifests import load_nodes
from gangkeeper.webhook.server import admission
from gangkeeper.webhook.server.admission import Policy, parse_review

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CONFIG = Config()


def assert_fits(warning: str, full: str | None = None) -> None:
    assert len(warning) <= MAX_WARNING and "\n" not in warning, warning
    if warning.endswith("…"):
        assert warning.endswith(ELLIPSIS) and warning[-3] != " ", f"cut mid-word: {warning!r}"
    if full is not None:
        # Whole words of the message (a cut may drop the colon or comma after one).
        words = {w.rstrip(":;,(") for w in full.split()}
        kept = warning.removesuffix(ELLIPSIS).split()
        assert all(w.rstrip(":;,(") in words for w in kept), warning


def test_a_long_clause_is_cut_at_a_space() -> None:
    text = "gangkeeper: not checked (" + "word " * 40 + "supported: jobset.x-k8s.io/v1alpha2)"
    short = fit_warning(text)
    assert_fits(short, text)
    assert short.startswith("gangkeeper: not checked (word")


def test_whole_clauses_are_kept_from_the_front() -> None:
    first = "gang team/a will wait: only 4 of the 16 GPUs it needs are free now"
    text = f"{first}; " + "and a long tail of detail " * 5
    assert fit_warning(text) == first + ELLIPSIS


def review_of(obj: dict[str, Any]) -> admission.Review:
    group, _, version = obj["apiVersion"].rpartition("/")
    request = {
        "uid": "u1", "operation": "CREATE", "namespace": "default", "object": obj,
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": "x"},
        "userInfo": {"username": "alice"},
    }
    return parse_review(
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "request": request}).encode()
    )


def test_the_unreadable_version_warning_keeps_whole_words() -> None:
    # An unknown JobSet version: the error names every version read, past 120 chars.
    jobset = yaml.safe_load((EXAMPLES / "jobset-fits.yaml").read_text())
    jobset["apiVersion"] = "jobset.x-k8s.io/v1alpha9"
    jobset["metadata"]["name"] = "a-jobset-with-a-rather-long-name-for-its-team"
    capacity = Capacity.from_nodes(load_nodes(EXAMPLES / "fleet.yaml"), CONFIG)
    try:
        validate_object(jobset, capacity=capacity, lookup=lambda *a: None, config=CONFIG)
    except PolicyError as exc:
        full = f"gangkeeper: not checked ({exc})"
    else:
        pytest.fail("an unknown JobSet version must not be read")
    answer = admission.validate(
        review_of(jobset), Policy(capacity=capacity, lookup=lambda *a: None, config=CONFIG)
    )
    warnings = answer.review["response"]["warnings"]
    assert len(full) > MAX_WARNING, "the test needs a message the limit shortens"
    for warning in warnings:
        assert_fits(warning, full)


def fleets() -> list[Capacity]:
    """The sample fleet empty, and with every node all but one GPU busy (waits)."""
    nodes = load_nodes(EXAMPLES / "fleet.yaml")
    empty = Capacity.from_nodes(nodes, CONFIG)
    busy = Capacity.from_nodes(nodes, CONFIG)
    for i, node in enumerate(nodes):
        gpus = int(node["status"]["allocatable"].get("nvidia.com/gpu", 0))
        if gpus > 1:
            busy.add_pod(f"busy-{i}", node["metadata"]["name"], {"nvidia.com/gpu": gpus - 1})
    return [empty, busy]


EXAMPLE_FILES = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name != "fleet.yaml")


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_warning_the_policy_gives_on_the_examples_fits(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    known = docs + [c for d in docs for c in children_for(d)]

    def lookup(api_version: str, kind: str, namespace: str, name: str) -> Any:
        return next((d for d in known if d.get("kind") == kind
                     and d["metadata"]["name"] == name), None)

    warnings: list[str] = []
    for capacity in fleets():
        for doc in docs:
            for decision in validate_object(doc, capacity=capacity, lookup=lookup,
                                            config=CONFIG):
                warnings.extend(decision.verdict.warnings)
            for pod in pods_for(doc, docs):
                namespace = pod["metadata"].get("namespace") or "default"
                decided = decide_pod(pod, namespace=namespace, capacity=capacity,
                                     lookup=lookup, config=CONFIG)
                warnings.extend(decided.verdict.warnings)
    for warning in warnings:
        assert_fits(warning)
