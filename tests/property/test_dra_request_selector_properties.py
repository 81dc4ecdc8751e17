"""A request's own selectors only narrow: the devices counted for a request with
selectors are never more than its class's (policies/dra/extended.py).

Plain dicts shaped as `k8s.io/api/resource/v1/types.go` ResourceSlice, DeviceClass and
ResourceClaimTemplate (`exactly.selectors[].cel.expression`).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.dra import read_claim_template, read_device_class, read_resource_slice
from gangkeeper.policies.dra.extended import UNCOUNTED, nodes_with_devices

DRIVER = "gpu.example.com"
CLASS = read_device_class({"metadata": {"name": "gpus"}, "spec": {
    "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}})  # fmt: skip
EXPRESSIONS = [
    f"device.attributes['{DRIVER}'].productName == 'H100'",
    f"device.attributes['{DRIVER}'].index < 4",
    f"device.attributes['{DRIVER}'].productName != 'A100' "
    f"|| device.attributes['{DRIVER}'].index == 0",
    "device.driver == 'other.example.com'",
    f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0",  # undecided
    f"device.attributes['{DRIVER}'].missing == 'x'",  # undecided: no such attribute
    "true",
]


@st.composite
def node_slice(draw: st.DrawFn) -> Any:
    devices = draw(st.lists(st.tuples(st.sampled_from(["H100", "A100"]), st.booleans()),
                            max_size=10))
    return read_resource_slice({"metadata": {"name": "s"}, "spec": {
        "driver": DRIVER, "nodeName": "n",
        "pool": {"name": "n", "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": f"d{i}",
                     "attributes": {"productName": {"string": product}, "index": {"int": i}},
                     **({"taints": [{"key": "k", "effect": "NoSchedule"}]} if tainted else {})}
                    for i, (product, tainted) in enumerate(devices)]}})  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(node_slice(), st.lists(st.sampled_from(EXPRESSIONS), min_size=1, max_size=3))
def test_a_requests_selectors_never_count_more_devices_than_its_class(
    piece: Any, expressions: list[str]
) -> None:
    demand = read_claim_template({"metadata": {"name": "t"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "r", "exactly": {
            "deviceClassName": "gpus", "count": 1,
            "selectors": [{"cel": {"expression": e}} for e in expressions]}}]}}}})[1]
    ((key, _),) = demand.narrowed.items()
    (out,), _ = nodes_with_devices([{"metadata": {"name": "n"}}], [piece], [CLASS],
                                   narrowed=demand.narrowed)  # fmt: skip
    allocatable = out["status"]["allocatable"]
    narrowed = int(allocatable.get(f"dra:{key}", 0))
    whole = int(allocatable.get("dra:gpus", 0))
    if whole == UNCOUNTED:
        return  # the class's count is unknown: anything narrower may be too
    assert narrowed <= whole or narrowed == UNCOUNTED
    if narrowed == UNCOUNTED:
        # Unknown only where an expression could not be decided on a class device.
        assert whole > 0
