"""What is free of a DRA class's devices on a node once "whole node" requests count.

A request of `allocationMode: All` takes every device of its class on the node it
lands on, and the allocator fails it when any of them is taken. A Node offering a
class's devices therefore also offers one `dra:<class>/all` (`model.WHOLE_NODE_SUFFIX`;
`dra.extended`), which such a request asks beside its devices, and one
`dra:<class>#<hash>/all` for each request narrowing the class with selectors of its own
(`model.NARROWED_MARK`). Their free amounts are tied to the devices' use on that node:
- the class's whole node is not free while any device of the class is used there (a
  bound pod's, one an allocated claim holds, a member placed before in the gang);
- nor is a narrowed whole node: a device of the class used by a request without those
  selectors may be one they accept (on a node of one device model, it is);
- no device of the class (narrowed or not) is free while the class's whole node is
  taken, nor a narrowed device while its narrowed whole node is (the All request was
  charged the fewest devices a node offers, but the allocator gave it all of them).

`free_of` applies this to a node's usage (the fleet, the capacity model); `tie` to the
assigner's free amounts as it places members one by one, so two members of one gang
are never put where the allocator would serve only one.

Only "free now" is tied: "could ever run" sees the allocatable amounts, where the
whole node is 1 and every device free.

Pure: names and amounts in, amounts out; imports only `model`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import DEVICE_RESOURCE_PREFIX, NARROWED_MARK, WHOLE_NODE_SUFFIX


def _tied(resource: str, used: Mapping[str, int]) -> bool:
    """Whether `used` leaves none of `resource` (a `dra:` name) free, whatever its count."""
    whole = resource.endswith(WHOLE_NODE_SUFFIX)
    body = resource[: -len(WHOLE_NODE_SUFFIX)] if whole else resource
    device_class, narrowed, _ = body.partition(NARROWED_MARK)
    if whole:
        # Any device of the class in use (every request charges its class, a narrowed
        # one too): a pod's plain request may hold a device the selectors accept.
        return used.get(device_class, 0) > 0
    if used.get(device_class + WHOLE_NODE_SUFFIX, 0) > 0:
        return True
    return bool(narrowed) and used.get(resource + WHOLE_NODE_SUFFIX, 0) > 0


def free_of(resource: str, amount: int, used: Mapping[str, int]) -> int:
    """What is free of `resource` (`amount` allocatable) on a node using `used`."""
    free = amount - used.get(resource, 0)
    if free <= 0:
        return 0
    if not used or not resource.startswith(DEVICE_RESOURCE_PREFIX):
        return free
    return 0 if _tied(resource, used) else free


def free_amounts(allocatable: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    """`free_of` every resource of `allocatable`."""
    return {r: free_of(r, a, used) for r, a in allocatable.items()}


def asks_devices(requests: Mapping[str, int]) -> bool:
    """Whether `requests` ask any DRA device (only then can `tie` change anything)."""
    return any(r.startswith(DEVICE_RESOURCE_PREFIX) for r in requests)


def tie(free: dict[str, int], taken: Mapping[str, int]) -> None:
    """Set to 0 in `free` (a node's free amounts, `taken` already subtracted) what the
    member that took `taken` leaves no longer free: its node is then as `free_of` sees
    it with `taken` among the node's usage."""
    for resource, amount in free.items():
        if amount > 0 and resource.startswith(DEVICE_RESOURCE_PREFIX) and _tied(resource, taken):
            free[resource] = 0
