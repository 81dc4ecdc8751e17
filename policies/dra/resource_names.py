"""The resource names DRA devices are counted under, and how messages name them.

The packing counts a DeviceClass's devices as an extended resource `dra:<class>` of
each Node (`extended`), and the node as a whole, for requests of `allocationMode: All`,
as one `dra:<class>/all` (`whole_name`; `assigner.whole_nodes` ties the two together).
A shared ResourceClaim's devices in a pod's limits are `dra:<class>@<claim>` (and
`dra:<class>/all@<claim>`) until `shared.charged_once` gives them to one member. No
such name exists in the cluster, so users never read one: `resource_text` words it, and
every message that names a resource goes through it.

A request with selectors of its own counts under `dra:<class>#<hash>` (`claims.
narrowed_key`), the devices of the class its selectors accept.

The grammar, after `dra:`: `<class>[#<hash>][/all][@<claim>]` (a class's name is a DNS
subdomain: it holds no `#`, `/` or `@`).

Pure: strings only.
"""

from __future__ import annotations

from ..model import DEVICE_RESOURCE_PREFIX, NARROWED_MARK, WHOLE_NODE_SUFFIX

#: Before a class's name in the resource that counts its devices.
PREFIX = DEVICE_RESOURCE_PREFIX
#: After a class's name in the resource that counts its whole nodes.
WHOLE = WHOLE_NODE_SUFFIX
#: Between a class and the claim in a shared claim's resource name.
SHARED = "@"


def whole_name(device_class: str) -> str:
    """The resource a node offers one of per class it offers devices of (All requests)."""
    return f"{PREFIX}{device_class}{WHOLE}"


def shared_name(device_class: str, claim: str) -> str:
    """The limit naming `claim`'s devices of `device_class` (or, for `device_class` +
    `WHOLE`, its whole node) in a pod sharing it."""
    return f"{PREFIX}{device_class}{SHARED}{claim}"


#: Between a class and the hash of a request's selectors (`claims.NARROWED`).
NARROWED = NARROWED_MARK


def counts_other_names(resource: str) -> bool:
    """Whether `resource` counts what another name counts already (a class's whole
    node, the devices a request's selectors narrow it to): a fleet drawn device by
    device leaves it out."""
    if not resource.startswith(PREFIX):
        return False
    body = resource.partition(SHARED)[0]
    return body.endswith(WHOLE) or NARROWED in body


def resource_text(resource: str) -> str:
    """How a message names a resource: `devices of DeviceClass <class>` for a class's
    devices, `nodes giving every device of DeviceClass <class> (allocationMode All)`
    for its whole nodes, the name itself for any other (nvidia.com/gpu, cpu)."""
    if not resource.startswith(PREFIX):
        return resource
    body, _, claim = resource[len(PREFIX):].partition(SHARED)
    whole = body.endswith(WHOLE)
    device_class, narrowed, _ = body[: -len(WHOLE)].partition(NARROWED) if whole else (
        body.partition(NARROWED))
    devices = f"device{'' if whole else 's'} of DeviceClass {device_class}"
    if narrowed:
        devices += " matching the request's selectors"
    text = f"nodes giving every {devices} (allocationMode All)" if whole else devices
    return f"{text} (ResourceClaim {claim})" if claim else text
