"""A request's own selectors narrow its class's devices (policies/dra/claims.py, extended.py).

`ExactDeviceRequest.selectors[]` (k8s.io/api/resource/v1/types.go, each a
`DeviceSelector` with `cel.expression`): a device counts toward the request when the
class's selectors and the request's accept it. Plain dicts shaped as the v1 API; the
fleet: 2 nodes of 8 H100 and 2 of 8 A100 of the driver gpu.example.com, and the class
`gpus` selecting the driver's devices.
"""

from __future__ import annotations

from typing import Any

from builders.devices import DRIVER, GPUS, GPUS_CONFIG, node

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.dra import (
    DeviceDemand,
    read_claim_template,
    read_resource_slice,
)
from gangkeeper.policies.dra.extended import (
    nodes_with_devices,
    with_claim_limits,
)
from gangkeeper.policies.dra.resource_names import resource_text
from gangkeeper.policies.fit.feasibility import check_gang
from gangkeeper.policies.model import Gang, Role, Source

TIMES = "\u00d7"
H100 = f"device.attributes['{DRIVER}'].productName == 'H100'"
#: Kubernetes' quantity() is not in the CEL package: this selector cannot be decided.
QUANTITY = f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0"
CONFIG = GPUS_CONFIG


def slice_of(name: str, product: str) -> Any:
    return read_resource_slice({"metadata": {"name": name}, "spec": {
        "driver": DRIVER, "nodeName": name,
        "pool": {"name": name, "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": f"d{i}", "attributes": {"productName": {"string": product}},
                     "capacity": {"memory": {"value": "80Gi"}}}
                    for i in range(8)]}})  # fmt: skip


NAMES = {"h0": "H100", "h1": "H100", "a0": "A100", "a1": "A100"}


def template(*expressions: str, count: int = 8) -> DeviceDemand:
    exactly: dict[str, Any] = {"deviceClassName": "gpus", "count": count}
    if expressions:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in expressions]
    return read_claim_template({"metadata": {"name": "t"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpus", "exactly": exactly}]}}}})[1]


def verdict(members: int, demand: DeviceDemand) -> Any:
    nodes, fewest = nodes_with_devices([node(n) for n in NAMES],
                                       [slice_of(n, p) for n, p in NAMES.items()],
                                       [GPUS], narrowed=demand.narrowed)  # fmt: skip
    pod = {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
           "containers": [{"name": "main"}]}  # fmt: skip
    limits = with_claim_limits(pod, {"t": demand}, fewest)["containers"][0]["resources"]["limits"]
    gang = Gang("team", "g", members,
                (Role("worker", members, {k: int(v) for k, v in limits.items()}),),
                Source("batch/v1", "Job", "team", "g"))  # fmt: skip
    return check_gang(gang, Capacity.from_nodes(nodes, CONFIG))


def test_three_workers_of_eight_h100s_on_two_h100_nodes_are_refused_naming_24_and_16() -> None:
    # Before: counted against the class's 32 devices, admitted.
    refused = verdict(3, template(H100))
    assert not refused.allowed
    assert (f"3 {TIMES} 8 devices of DeviceClass gpus matching the request's selectors = 24"
            in refused.reason), refused.reason
    assert "at most 16" in refused.reason, refused.reason
    assert "dra:" not in refused.reason


def test_two_workers_of_eight_h100s_fit_the_two_h100_nodes() -> None:
    assert verdict(2, template(H100)).allowed


def test_without_selectors_the_class_counts_as_before() -> None:
    assert verdict(4, template()).allowed
    assert not verdict(5, template()).allowed


def test_a_request_selector_this_cel_cannot_decide_refuses_nothing() -> None:
    assert verdict(3, template(QUANTITY)).allowed
    assert verdict(4, template(QUANTITY)).allowed


def test_the_narrowed_resource_is_named_in_words() -> None:
    (key,) = template(H100).narrowed
    assert resource_text(f"dra:{key}") == (
        "devices of DeviceClass gpus matching the request's selectors")
    assert resource_text(f"dra:{key}/all") == (
        "nodes giving every device of DeviceClass gpus matching the request's selectors "
        "(allocationMode All)")


def test_the_same_selectors_give_the_same_key_and_others_another() -> None:
    assert template(H100).narrowed == template(H100, count=2).narrowed
    assert template(H100).narrowed.keys() != template(QUANTITY).narrowed.keys()


def test_where_the_nodes_were_not_counted_for_the_selectors_the_class_is_charged() -> None:
    """The live path counts no narrowed key yet (`DeviceView.counted` is empty): the
    request is charged against its class alone, as before, never against a resource
    no node offers (which would refuse every such gang)."""
    pod = {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
           "containers": [{"name": "main"}]}  # fmt: skip

    def limits(demand: DeviceDemand, counted: frozenset[str] | None) -> dict[str, str]:
        out = with_claim_limits(pod, {"t": demand}, {"gpus": 8}, counted=counted)
        return dict(out["containers"][0]["resources"]["limits"])

    exact = template(H100)
    (key,) = exact.narrowed
    assert limits(exact, frozenset()) == {"dra:gpus": "8"}
    assert limits(exact, None) == {"dra:gpus": "8", f"dra:{key}": "8"}
    every = read_claim_template({"metadata": {"name": "t"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpus", "allocationMode": "All",
            "selectors": [{"cel": {"expression": H100}}]}}]}}}})[1]  # fmt: skip
    # All of the narrowed devices: at least one of the class (the class's fewest would
    # charge devices the selectors leave out, and refuse a pod that fits).
    assert limits(every, frozenset()) == {"dra:gpus": "1"}


def test_two_narrowed_requests_of_one_class_fit_a_node_holding_both_kinds_live() -> None:
    """Live (no narrowed key counted): a pod asking every H100 (All) and 4 A100s, on a
    node of 4 H100s and 4 A100s, fits; charging the All its class's fewest (8) plus 4
    refused it with 12 of 8, where `check --nodes` admitted it."""
    mixed = read_resource_slice({"metadata": {"name": "m"}, "spec": {
        "driver": DRIVER, "nodeName": "m",
        "pool": {"name": "m", "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": f"d{i}", "attributes": {"productName": {
            "string": "H100" if i < 4 else "A100"}}} for i in range(8)]}})  # fmt: skip
    nodes, fewest = nodes_with_devices([node("m")], [mixed], [GPUS])
    both = read_claim_template({"metadata": {"name": "t"}, "spec": {"spec": {"devices": {
        "requests": [
            {"name": "h", "exactly": {"deviceClassName": "gpus", "allocationMode": "All",
                                      "selectors": [{"cel": {"expression": H100}}]}},
            {"name": "a", "exactly": {"deviceClassName": "gpus", "count": 4, "selectors": [
                {"cel": {"expression": H100.replace("H100", "A100")}}]}}]}}}})[1]  # fmt: skip
    pod = {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
           "containers": [{"name": "main"}]}  # fmt: skip
    limits = with_claim_limits(pod, {"t": both}, fewest, counted=frozenset())
    asked = {k: int(v) for k, v in limits["containers"][0]["resources"]["limits"].items()}
    gang = Gang("team", "g", 1, (Role("worker", 1, asked),),
                Source("batch/v1", "Job", "team", "g"))
    verdict_ = check_gang(gang, Capacity.from_nodes(nodes, CONFIG))
    assert verdict_.allowed, verdict_.reason
