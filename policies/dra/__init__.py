"""Dynamic Resource Allocation (resource.k8s.io/v1): what devices nodes offer a class.

- `slices`: ResourceSlices to the devices each node can use, by pool (the newest
  generation of each pool only; incomplete and invalid pools left out, as the scheduler's
  allocator does).
- `classes`: DeviceClasses, and which devices a class's CEL selectors accept.
- `capacity`: per node, how many devices each class can be given, or "unknown".
- `claims`: what pods ask of each class through ResourceClaimTemplates and shared
  ResourceClaims.
- `resource_names`: the `dra:<class>` names devices are counted under, and their text.
- `shared`: a shared ResourceClaim's devices asked once per gang.
- `allocated`: devices that allocated ResourceClaims hold.

The wire format is `k8s.io/api/resource/v1/types.go` (kubernetes/api); every field
read is named after it. Pure: plain dicts in, frozen dataclasses out; no I/O and no
client library. CEL is evaluated by the `common-expression-language` package (`cel`).
"""

from .claims import (
    DeviceDemand,
    PodClaims,
    claim_spec_demand,
    pod_claims,
    read_claim,
    read_claim_template,
)
from .class_capacity import UNKNOWN, NodeClassCapacity, class_capacity
from .classes import DeviceClass, SelectorVerdict, read_device_class, selects
from .slices import Device, node_devices, read_resource_slice

__all__ = [
    "UNKNOWN",
    "Device",
    "DeviceClass",
    "DeviceDemand",
    "NodeClassCapacity",
    "PodClaims",
    "SelectorVerdict",
    "claim_spec_demand",
    "class_capacity",
    "node_devices",
    "pod_claims",
    "read_claim",
    "read_claim_template",
    "read_device_class",
    "read_resource_slice",
    "selects",
]
