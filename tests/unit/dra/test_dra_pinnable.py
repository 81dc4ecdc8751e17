"""Whether counting a pod's claimed devices can promise a node (policies/dra/pinnable.py):
the release pins a member with claims only when it can, and otherwise says why.

Plain dicts shaped as core/v1 `PodSpec.resourceClaims` (PodResourceClaim) and
`k8s.io/api/resource/v1` ResourceClaimTemplate."""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies.dra import read_claim_template
from gangkeeper.policies.dra.pinnable import pin_doubt

GPU = "gpu.example.com"


def template(name: str, **request: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"spec": {"devices": {"requests": [
        {"name": "gpus", "exactly": {"deviceClassName": GPU, **request}}]}}}}


TEMPLATES = dict(read_claim_template(t) for t in (
    template("eight", count=8), template("whole", allocationMode="All")))


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
        pytest.param([{"name": "g", "resourceClaimTemplateName": "whole"}],
                     "a claim whose request gpus asks every device of its class on the node "
                     "(allocationMode All)", id="all-mode"),
        pytest.param([{"name": "g"}], "DRA claims that cannot be read (spec.resourceClaims[0]: "
                     "must set exactly one of resourceClaimName, resourceClaimTemplateName)",
                     id="malformed"),
    ],
)  # fmt: skip
def test_a_pod_is_pinned_by_its_device_count_only_when_the_count_is_sure(
    claims: list[dict[str, str]], why: str
) -> None:
    assert pin_doubt(spec(*claims), TEMPLATES) == why
