"""The placeholder pod: what it copies from its member, and what it must not."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from builders.gangs import pod

from gangkeeper.policies.autoscaling.placeholders import (
    effective_requests,
    placeholder_name,
    placeholder_pod,
    quantity_text,
)
from gangkeeper.policies.settings.autoscaling import Autoscaling
from gangkeeper.policies.settings.config import load_config

OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid",
         "controller": True, "blockOwnerDeletion": True}


def member() -> dict[str, Any]:
    body = pod("train-0", 8, gang="train", min_member=4, selector={"pool": "h100"},
               tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    spec = body["spec"]
    spec["containers"][0]["resources"]["requests"] = {"cpu": "1500m", "memory": "64Gi"}
    spec["initContainers"] = [
        {"name": "fetch", "image": "x", "resources": {"requests": {"cpu": "4"}}},
        {"name": "proxy", "image": "x", "restartPolicy": "Always",
         "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
    ]
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
        },
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"gangkeeper.io/gang": "train"}},
             "topologyKey": "rack"}]},
    }
    spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "rack",
                                          "whenUnsatisfiable": "DoNotSchedule"}]
    return body


def test_a_placeholder_asks_for_what_its_member_asks_and_may_go_where_it_may_go() -> None:
    body = placeholder_pod(member(), "train", Autoscaling(), OWNER)
    spec = body["spec"]
    [container] = spec["containers"]
    # cpu: max(init container 4, app 1.5 + sidecar 0.25) = 4 (the sidecar starts after
    # the init container, so they never run together); memory: 64Gi + the sidecar's 1Gi.
    assert container["resources"]["requests"] == {
        "cpu": "4", "memory": str(65 * 2**30), "nvidia.com/gpu": "8",
    }
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert container["image"] == "registry.k8s.io/pause:3.10"
    assert spec["nodeSelector"] == {"pool": "h100"}
    assert spec["tolerations"] == member()["spec"]["tolerations"]
    assert spec["topologySpreadConstraints"] == member()["spec"]["topologySpreadConstraints"]
    # Required node affinity only: preferences do not bind, and pod affinity to the
    # members' labels could never be met by a pod that is not a member.
    assert spec["affinity"] == {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution":
            member()["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"]}}
    assert "schedulingGates" not in spec
    assert spec["priorityClassName"] == "gangkeeper-placeholder"
    assert spec["preemptionPolicy"] == "Never"


def test_a_placeholder_is_labelled_for_its_gang_skipped_by_the_webhook_and_not_disrupted() -> None:
    meta = placeholder_pod(member(), "train", Autoscaling(), OWNER)["metadata"]
    assert meta["name"] == "train-0-gkp"
    assert meta["labels"]["gangkeeper.io/placeholder-for"] == "train"
    assert meta["labels"]["gangkeeper.io/skip"] == "true"
    assert "gangkeeper.io/gang" not in meta["labels"]  # never a member
    assert meta["annotations"] == {
        "gangkeeper.io/placeholder-member": "train-0",
        "karpenter.sh/do-not-disrupt": "true",
    }
    [ref] = meta["ownerReferences"]
    assert (ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == ("job-uid", False, False)


def test_the_image_and_priority_class_come_from_the_config() -> None:
    config = load_config({"placeholders": {"image": "mirror/pause:1", "priorityClassName": "low"}})
    spec = placeholder_pod(member(), "train", config.autoscaling, None)["spec"]
    assert (spec["containers"][0]["image"], spec["priorityClassName"]) == ("mirror/pause:1", "low")


def test_a_long_member_name_gives_a_valid_stable_placeholder_name() -> None:
    long = "m" * 300
    name = placeholder_name(long)
    assert len(name) <= 253 and name == placeholder_name(long) and name.endswith("-gkp")
    assert placeholder_name("m" * 299) != name


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [("cpu", Fraction(3, 2), "1500m"), ("cpu", Fraction(2), "2"), ("memory", Fraction(10), "10"),
     ("memory", Fraction(1, 3), "334m"), ("nvidia.com/gpu", Fraction(8), "8")],
)
def test_quantities_are_written_so_the_server_accepts_them_never_below(
    resource: str, value: Fraction, text: str
) -> None:
    assert quantity_text(resource, value) == text


def test_pod_overhead_counts_and_unreadable_requests_are_left_out() -> None:
    spec = {"containers": [{"resources": {"requests": {"cpu": "junk", "memory": "1Gi"}}}],
            "overhead": {"memory": "128Mi"}}
    assert effective_requests(spec) == {"memory": Fraction(2**30 + 128 * 2**20)}


def test_a_placeholder_asks_its_members_devices_through_the_same_claim_templates() -> None:
    # The autoscaler must add a node with the member's DRA devices: the placeholder
    # gets claims of its own from the member's (namespaced, reusable) templates. A
    # shared ResourceClaim is left out: the placeholder would reserve it, and its
    # allocation would hold the devices on the placeholder's node for every sharer.
    body = pod("train-0", 0, gang="train", min_member=4)
    body["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}, {"name": "nic"}]}
    body["spec"]["resourceClaims"] = [
        {"name": "gpus", "resourceClaimTemplateName": "eight-gpus"},
        {"name": "nic", "resourceClaimName": "rack-nic"},
    ]
    spec = placeholder_pod(body, "train", Autoscaling(), OWNER)["spec"]
    assert spec["resourceClaims"] == [{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]
    assert "claims" not in spec["containers"][0]["resources"]
    assert "resourceClaims" not in placeholder_pod(member(), "train", Autoscaling(), OWNER)["spec"]
