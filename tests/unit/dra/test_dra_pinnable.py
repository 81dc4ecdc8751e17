"""Whether counting a pod's claimed devices can promise a node (policies/dra/pinnable.py):
the release pins a member with claims only when it can, and otherwise says why.

Plain dicts shaped as core/v1 `PodSpec.resourceClaims` (PodResourceClaim) and
`k8s.io/api/resource/v1` ResourceClaimTemplate."""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies.dra import read_claim_template
from gangkeeper.policies.dra.pinnable import pinning

GPU = "gpu.example.com"


def template(name: str, **request: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"spec": {"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": GPU, **request}}]}}}}


SELECTORS = [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "H100"'}}]
TEMPLATES = dict(read_claim_template(t) for t in (
    template("eight", count=8), template("whole", allocationMode="All"),
    template("h100", count=8, selectors=SELECTORS),
    template("admin", count=8, adminAccess=True)))
#: The narrowed key of the h100 template (`claims.narrowed_key`), as the nodes were
#: counted for it.
COUNTED = frozenset(TEMPLATES["h100"].narrowed)


def spec(*claims: dict[str, str]) -> dict[str, Any]:
    return {"containers": [{"name": "main"}], "resourceClaims": list(claims)}


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        pytest.param([], "", id="no-claim"),
        pytest.param([{"name": "g", "resourceClaimTemplateName": "eight"}], "",
                     id="own-exact-count"),
        pytest.param([{"name": "g", "resourceClaimTemplateName": "eight"},
                      {"name": "n", "resourceClaimName": "rack-nic"}],
                     "shared ResourceClaim rack-nic (its allocation decides the node)",
                     id="shared-claim"),
        pytest.param([{"name": "g", "resourceClaimTemplateName": "gone"}],
                     "ResourceClaimTemplate gone not found (its devices are not counted)",
                     id="unknown-template"),
        pytest.param([{"name": "g", "resourceClaimTemplateName": "whole"}], "",
                     id="all-mode"),
        pytest.param([{"name": "g", "resourceClaimTemplateName": "h100"}], "",
                     id="own-selectors-counted"),
        pytest.param([{"name": "g", "resourceClaimTemplateName": "admin"}],
                     "a claim whose request gpus asks admin access (counted as no device)",
                     id="admin-access"),
        pytest.param([{"name": "g"}], "DRA claims that cannot be read (spec.resourceClaims[0]: "
                     "must set exactly one of resourceClaimName, resourceClaimTemplateName)",
                     id="malformed"),
    ],
)  # fmt: skip
def test_a_pod_is_pinned_by_its_device_count_only_when_the_count_is_sure(
    claims: list[dict[str, str]], why: str
) -> None:
    assert pinning(spec(*claims), TEMPLATES, counted=COUNTED).doubt == why


def test_a_request_whose_own_selectors_the_nodes_are_not_counted_for_is_not_pinned() -> None:
    # It is charged against its class until the view counts the nodes for it.
    why = pinning(spec({"name": "g", "resourceClaimTemplateName": "h100"}), TEMPLATES).doubt
    assert why.startswith("a request's own selectors (gpu.example.com#")
    assert why.endswith("the nodes are not counted for yet")


SHARED = {"fresh": ("", TEMPLATES["eight"]), "on-node": ("node-2", TEMPLATES["eight"]),
          "spread": (None, TEMPLATES["eight"])}


@pytest.mark.parametrize(
    ("claim", "why"),
    [
        pytest.param("fresh", "", id="not-allocated-yet"),
        pytest.param("on-node", "", id="allocated-on-one-node"),
        pytest.param("spread", "shared ResourceClaim spread (allocated to devices no single "
                     "node holds: its allocation decides the nodes)", id="allocated-on-many"),
        pytest.param("gone", "shared ResourceClaim gone (not found: its devices are not "
                     "counted)", id="not-found"),
    ],
)  # fmt: skip
def test_pods_sharing_a_claim_are_pinned_together_unless_no_single_node_can_hold_it(
    claim: str, why: str
) -> None:
    # The release pins the sharers to one node (policies/release/shared_claims.py):
    # the node its allocation names, or one where its devices are free.
    shared = spec({"name": "g", "resourceClaimTemplateName": "eight"},
                  {"name": "n", "resourceClaimName": claim})
    assert pinning(shared, TEMPLATES, counted=COUNTED, shared=SHARED).doubt == why
