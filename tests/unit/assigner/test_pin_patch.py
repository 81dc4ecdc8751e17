"""The gate-lifting, node-pinning patch, and the constraints that forbid a pin."""

from __future__ import annotations

import jsonpatch  # type: ignore[import-untyped]
import pytest

from gangkeeper.policies.assigner import pin_patch, unmodeled
from gangkeeper.policies.assigner.pin import pinned_hostname
from gangkeeper.policies.names import GATE


def apply(pod: dict[str, object], ops: list[dict[str, object]]) -> dict[str, object]:
    return jsonpatch.apply_patch(pod, ops)  # type: ignore[no-any-return]


def test_lifts_the_gate_and_adds_the_hostname_in_one_patch() -> None:
    pod = {"spec": {"schedulingGates": [{"name": "other"}, {"name": GATE}]}}
    out = apply(pod, pin_patch(["other", GATE], None, "n1"))
    assert out["spec"] == {
        "schedulingGates": [{"name": "other"}],
        "nodeSelector": {"kubernetes.io/hostname": "n1"},
    }


def test_keeps_the_users_keys_and_never_overwrites_a_hostname() -> None:
    pod = {"spec": {"schedulingGates": [{"name": GATE}], "nodeSelector": {"pool": "a"}}}
    out = apply(pod, pin_patch([GATE], {"pool": "a"}, "n1"))
    assert out["spec"]["nodeSelector"] == {"pool": "a", "kubernetes.io/hostname": "n1"}
    mine = {"pool": "a", "kubernetes.io/hostname": "n7"}
    pod = {"spec": {"schedulingGates": [{"name": GATE}], "nodeSelector": dict(mine)}}
    out = apply(pod, pin_patch([GATE], mine, "n1"))
    assert out["spec"]["nodeSelector"] == mine


def test_the_pin_is_read_back_from_the_patched_pod() -> None:
    pod = {"spec": {"schedulingGates": [{"name": GATE}], "nodeSelector": {"pool": "a"}}}
    assert pinned_hostname(pod["spec"]) == ""
    assert pinned_hostname(apply(pod, pin_patch([GATE], {"pool": "a"}, "n1"))["spec"]) == "n1"


def test_a_changed_selector_or_gate_list_fails_the_patch() -> None:
    pod = {"spec": {"schedulingGates": [{"name": GATE}], "nodeSelector": {"pool": "b"}}}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        apply(pod, pin_patch([GATE], {"pool": "a"}, "n1"))
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        apply(pod, pin_patch(["x", GATE], {"pool": "b"}, "n1"))


def test_without_a_node_it_is_the_plain_gate_removal() -> None:
    ops = pin_patch([GATE], None, None)
    assert [op["op"] for op in ops] == ["test", "replace"]


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone"}]}}}, "podAntiAffinity"),
        ({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone"}]}}}, "podAffinity"),
        ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}]}, "DoNotSchedule"),
        ({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]},
         "hostPort"),
        ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]}, "data"),
        ({"volumes": [{"name": "scratch", "ephemeral": {}}]}, "scratch"),
        ({"resourceClaims": [{"name": "gpu"}]}, "DRA resourceClaims whose devices are not counted"),
    ],
)
def test_constraints_the_assigner_does_not_model(spec: dict[str, object], why: str) -> None:
    assert why in unmodeled(spec)


def test_dra_claims_whose_devices_were_counted_are_pinned_unless_the_count_is_unsure() -> None:
    # The controller counts a member's claims as `dra:<class>` requests and says
    # whether that count can place them (policies/dra/pinnable.py).
    spec = {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "eight"}]}
    assert unmodeled(spec, claims="") == ""
    assert unmodeled(spec, claims="shared ResourceClaim x") == "shared ResourceClaim x"


def test_soft_and_harmless_constraints_allow_a_pin() -> None:
    spec = {
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}},
        "topologySpreadConstraints": [{"whenUnsatisfiable": "ScheduleAnyway"}],
        "containers": [{"name": "c", "ports": [{"containerPort": 80}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "c"}}, {"name": "t", "emptyDir": {}}],
    }
    assert unmodeled(spec) == ""
