"""The resource names DRA devices are counted under, and how messages name them.

The packing counts a DeviceClass's devices as an extended resource `dra:<class>` of
each Node (`extended`); a shared ResourceClaim's devices in a pod's limits are
`dra:<class>@<claim>` until `shared.charged_once` gives them to one member. No such
name exists in the cluster, so users never read one: `resource_text` words it, and
every message that names a resource goes through it.

Pure: strings only.
"""

from __future__ import annotations

from ..model import DEVICE_RESOURCE_PREFIX

#: Before a class's name in the resource that counts its devices.
PREFIX = DEVICE_RESOURCE_PREFIX
#: Between a class and the claim in a shared claim's resource name.
SHARED = "@"


def shared_name(device_class: str, claim: str) -> str:
    """The limit naming `claim`'s devices of `device_class` in a pod sharing it."""
    return f"{PREFIX}{device_class}{SHARED}{claim}"


def resource_text(resource: str) -> str:
    """How a message names a resource: `devices of DeviceClass <class>` for a class's
    devices, the name itself for any other (nvidia.com/gpu, cpu)."""
    if not resource.startswith(PREFIX):
        return resource
    device_class, _, claim = resource[len(PREFIX):].partition(SHARED)
    text = f"devices of DeviceClass {device_class}"
    return f"{text} (ResourceClaim {claim})" if claim else text
