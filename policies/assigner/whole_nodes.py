"""What is free of a DRA class's devices on a node once "whole node" requests count.

A request of `allocationMode: All` takes every device of its class on the node it
lands on, and the allocator fails it when any of them is taken. A Node offering a
class's devices therefore also offers one `dra:<class>/all` (`model.WHOLE_NODE_SUFFIX`;
`dra.extended`), which such a request asks beside its devices, and one
`dra:<class>#<hash>/all` for each request narrowing the class with selectors of its own
(`model.NARROWED_MARK`). Their free amounts are tied to the devices' use on that node:
- the class's whole node is not free while any device of the class is used there (a
  bound pod's, one an allocated claim holds, a member placed before in the gang);
- nor, where a request's selectors accept every device of the class on the node, is
  its narrowed whole node; elsewhere that whole node is not free while a device the
  selectors accept is used (counted exactly for claims' held devices);
- no device of the class (narrowed or not) is free while the class's whole node is
  taken, or a narrowed whole node whose selectors accept every device there; nor a
  narrowed device while its narrowed whole node is (the All request was charged the
  fewest devices a node offers, but the allocator gave it all of them).

`free_of` applies this to a node's usage (the fleet, the capacity model) with the
node's amounts; `tie` to the assigner's free amounts as it places members one by one,
so two members of one gang are never put where the allocator would serve only one
(without the node's amounts: every narrowed key is taken to cover its class there).

Only "free now" is tied: "could ever run" sees the allocatable amounts, where the
whole node is 1 and every device free.

Pure: names and amounts in, amounts out; imports only `model`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import DEVICE_RESOURCE_PREFIX, NARROWED_MARK, WHOLE_NODE_SUFFIX


def _uniform(narrowed: str, device_class: str, allocatable: Mapping[str, int] | None) -> bool:
    """Whether the selectors of `narrowed` (`dra:<class>#<hash>`) accept every device of
    its class on the node (assumed so where the node's amounts are not given)."""
    if allocatable is None:
        return True
    return allocatable.get(narrowed, 0) >= allocatable.get(device_class, 0)


def _taken_whole(device_class: str, used: Mapping[str, int],
                 allocatable: Mapping[str, int] | None) -> bool:
    """Whether an All request took every device of the class on the node: the class's
    own whole node, or a narrowed one whose selectors accept every device there."""
    if used.get(device_class + WHOLE_NODE_SUFFIX, 0) > 0:
        return True
    prefix = device_class + NARROWED_MARK
    return any(amount > 0 and name.startswith(prefix) and name.endswith(WHOLE_NODE_SUFFIX)
               and _uniform(name[: -len(WHOLE_NODE_SUFFIX)], device_class, allocatable)
               for name, amount in used.items())  # fmt: skip


def _tied(resource: str, used: Mapping[str, int],
          allocatable: Mapping[str, int] | None = None) -> bool:
    """Whether `used` leaves none of `resource` (a `dra:` name) free, whatever its count."""
    whole = resource.endswith(WHOLE_NODE_SUFFIX)
    body = resource[: -len(WHOLE_NODE_SUFFIX)] if whole else resource
    device_class = body.partition(NARROWED_MARK)[0]
    narrowed = body if body != device_class else ""
    if _taken_whole(device_class, used, allocatable):
        return True
    if whole and not narrowed:
        # Every request charges its class (a narrowed one too).
        return used.get(device_class, 0) > 0
    if whole:
        if used.get(narrowed, 0) > 0:
            return True
        # Where the selectors accept every device, any device of the class in use is
        # one of theirs; elsewhere a pod's plain request may hold one (the node is
        # left to the allocator then: `release.pinning.mixed_devices`).
        return _uniform(narrowed, device_class, allocatable) and used.get(device_class, 0) > 0
    return bool(narrowed) and used.get(narrowed + WHOLE_NODE_SUFFIX, 0) > 0


def free_of(resource: str, amount: int, used: Mapping[str, int],
            allocatable: Mapping[str, int] | None = None) -> int:
    """What is free of `resource` (`amount` allocatable) on a node using `used`;
    `allocatable`: the node's amounts (which narrowed keys cover every device of
    their class there), all assumed to when not given."""
    free = amount - used.get(resource, 0)
    if free <= 0:
        return 0
    if not used or not resource.startswith(DEVICE_RESOURCE_PREFIX):
        return free
    return 0 if _tied(resource, used, allocatable) else free


def free_amounts(allocatable: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    """`free_of` every resource of `allocatable`."""
    return {r: free_of(r, a, used, allocatable) for r, a in allocatable.items()}


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
