"""DRA demand: pods' resource claims to devices asked of each class.

Objects are plain dicts shaped as `k8s.io/api/resource/v1/types.go` defines them
(ResourceClaimTemplate, ResourceClaimSpec, DeviceRequest, ExactDeviceRequest,
DeviceSubRequest) and core/v1 PodResourceClaim.
"""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies.dra import (
    DeviceDemand,
    pod_claims,
    read_claim_template,
)
from gangkeeper.policies.errors import InvalidObject

GPU = "gpu.example.com"


def template(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def exactly(count: int | None = None, cls: str = GPU, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, **extra}
    if count is not None:
        body["count"] = count
    return {"name": "r", "exactly": body}


def demand_of(*requests: dict[str, Any]) -> DeviceDemand:
    return read_claim_template(template("t", *requests))[1]


@pytest.mark.parametrize(
    ("requests", "counts", "every"),
    [
        pytest.param([exactly(8)], {GPU: 8}, set(), id="exact-count"),
        pytest.param([exactly()], {GPU: 1}, set(), id="count-defaults-to-one"),
        pytest.param([exactly(4), exactly(2), exactly(1, cls="nic.example.com")],
                     {GPU: 6, "nic.example.com": 1}, set(), id="requests-add-up-per-class"),
        pytest.param([exactly(allocationMode="All")], {}, {GPU}, id="all-mode"),
        pytest.param([exactly(8, adminAccess=True)], {}, set(), id="admin-access-takes-none"),
        pytest.param([{"name": "r", "firstAvailable": [
            {"name": "big", "deviceClassName": GPU, "count": 8},
            {"name": "small", "deviceClassName": GPU, "count": 2}]}],
            {GPU: 2}, set(), id="first-available-smallest"),
        pytest.param([{"name": "r", "firstAvailable": [
            {"name": "big", "deviceClassName": GPU, "count": 8},
            {"name": "whole", "deviceClassName": GPU, "allocationMode": "All"}]}],
            {GPU: 1}, set(), id="first-available-all-is-at-least-one"),
        pytest.param([{"name": "r", "firstAvailable": [
            {"name": "h100", "deviceClassName": GPU, "count": 8},
            {"name": "a100", "deviceClassName": "a100.example.com", "count": 8}]}],
            {}, set(), id="first-available-across-classes-charges-none"),
    ],
)  # fmt: skip
def test_each_request_form_is_counted_as_the_fewest_devices_it_may_need(
    requests: list[dict[str, Any]], counts: dict[str, int], every: set[str]
) -> None:
    demand = demand_of(*requests)
    assert (dict(demand.counts), set(demand.every)) == (counts, every)


def pod(*claims: dict[str, str]) -> dict[str, Any]:
    return {"containers": [{"name": "main"}], "resourceClaims": list(claims)}


def test_every_pod_gets_its_own_claims_from_a_template_and_shares_a_named_claim() -> None:
    templates = dict([read_claim_template(template("eight", exactly(8)))])
    pods = [
        pod({"name": "gpus", "resourceClaimTemplateName": "eight"},
            {"name": "nic", "resourceClaimName": "rack-nic"})
        for _ in range(5)
    ]  # fmt: skip
    read = [pod_claims(p, templates) for p in pods]
    assert [dict(p.own.counts) for p in read] == [{GPU: 8}] * 5
    # The shared claim is named, not counted per pod (shared.charged_once counts it).
    assert [set(p.shared) for p in read] == [{"rack-nic"}] * 5


def test_a_template_that_was_not_given_is_reported_not_guessed() -> None:
    read = pod_claims(pod({"name": "gpus", "resourceClaimTemplateName": "missing"}), {})
    assert read.unresolved == {"missing"} and dict(read.own.counts) == {}


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (template("t", exactly(0)),
         "ResourceClaimTemplate t: spec.spec.devices.requests[0].exactly.count"),
        (template("t", exactly(allocationMode="Some")), "requests[0].exactly.allocationMode"),
        (template("t", {"name": "r"}), "ResourceClaimTemplate t: spec.spec.devices.requests[0]"),
        (template("t", {"name": "r", "exactly": {"count": 1}}), "exactly.deviceClassName"),
    ],
    ids=["zero-count", "unknown-mode", "neither-form", "no-class"],
)  # fmt: skip
def test_a_malformed_template_is_an_error_naming_it_and_the_field(
    obj: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidObject) as caught:
        read_claim_template(obj)
    assert field in str(caught.value)


def test_a_pod_claim_naming_both_sources_is_an_error_naming_the_field() -> None:
    both = {"name": "x", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}
    with pytest.raises(InvalidObject, match=r"spec.resourceClaims\[0\]"):
        pod_claims(pod(both), {})


@pytest.mark.parametrize(
    ("requests", "doubt"),
    [
        pytest.param([exactly(8), exactly(1, cls="nic.example.com")], None, id="exact-counts"),
        pytest.param([{"name": "r", "firstAvailable": [
            {"name": "only", "deviceClassName": GPU, "count": 8}]}],
            None, id="first-available-of-one"),
        # All and a request's own selectors are counted per node (a whole node, a
        # narrowed key): pinnable, no doubt.
        pytest.param([exactly(allocationMode="All")], None, id="all-mode"),
        pytest.param([exactly(8, adminAccess=True)], "admin access", id="admin-access"),
        pytest.param([exactly(8, selectors=[{"cel": {"expression": "true"}}])],
                     None, id="request-selectors"),
        # Exact counts of one class: pinned by the largest (`extra`), no doubt.
        pytest.param([{"name": "r", "firstAvailable": [
            {"name": "big", "deviceClassName": GPU, "count": 8},
            {"name": "small", "deviceClassName": GPU, "count": 2}]}],
            None, id="first-available-alternatives"),
        pytest.param([{"name": "r", "firstAvailable": [
            {"name": "big", "deviceClassName": GPU, "count": 8},
            {"name": "narrow", "deviceClassName": GPU, "count": 2,
             "selectors": [{"cel": {"expression": "true"}}]}]}],
            "firstAvailable alternatives", id="first-available-alternative-with-selectors"),
        # One alternative with selectors: they are not applied to the count.
        pytest.param([{"name": "r", "firstAvailable": [
            {"name": "narrow", "deviceClassName": GPU, "count": 2,
             "selectors": [{"cel": {"expression": "true"}}]}]}],
            "firstAvailable alternatives with selectors", id="one-alternative-with-selectors"),
        pytest.param([{"name": "r", "firstAvailable": [
            {"name": "h100", "deviceClassName": GPU, "count": 8},
            {"name": "a100", "deviceClassName": "a100.example.com", "count": 8}]}],
            "firstAvailable alternatives", id="alternatives-across-classes"),
    ],
)  # fmt: skip
def test_a_count_that_may_not_be_what_the_allocator_takes_on_a_node_says_why(
    requests: list[dict[str, Any]], doubt: str | None
) -> None:
    # The release pins a member by this count only when there is no doubt
    # (policies/dra/pinnable.py).
    doubts = demand_of(*requests).doubts
    if doubt is None:
        assert doubts == frozenset()
    else:
        (only,) = doubts
        assert only.startswith("request r ") and doubt in only


def test_doubts_of_a_pods_claims_add_up_like_its_counts() -> None:
    templates = dict([read_claim_template(template("eight", exactly(8))),
                      read_claim_template(template("nics", exactly(allocationMode="All",
                                                                   cls="nic"))),
                      read_claim_template(template("admin", exactly(1, adminAccess=True)))])
    read = pod_claims(pod({"name": "g", "resourceClaimTemplateName": "eight"},
                          {"name": "n", "resourceClaimTemplateName": "nics"},
                          {"name": "a", "resourceClaimTemplateName": "admin"}), templates)
    assert dict(read.own.counts) == {GPU: 8} and read.own.every == {"nic"}
    assert [d.split(" (")[0] for d in read.own.doubts] == ["request r asks admin access"]


def test_first_available_alternatives_of_one_class_ask_their_smallest_and_keep_the_rest() -> None:
    # Counted as the smallest (what "could ever run" needs), and the largest less the
    # smallest kept as `extra`: the release pins the member only where that fits too.
    demand = demand_of({"name": "r", "firstAvailable": [
        {"name": "big", "deviceClassName": GPU, "count": 8},
        {"name": "mid", "deviceClassName": GPU, "count": 4},
        {"name": "small", "deviceClassName": GPU, "count": 2}]}, exactly(1))
    assert dict(demand.counts) == {GPU: 3}
    assert dict(demand.extra) == {GPU: 6}
    assert demand.doubts == frozenset()
