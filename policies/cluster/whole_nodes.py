"""What is free of a DRA class's devices on a node once "whole node" requests count.

A request of `allocationMode: All` takes every device of its class on the node it
lands on, and the allocator fails it when any of them is taken. A Node offering a
class's devices therefore also offers one `dra:<class>/all` (`model.WHOLE_NODE_SUFFIX`;
`dra.extended`), which such a request asks beside its devices. Its free amount is tied
to the devices' use on that node:
- the whole node is not free while any device of the class is used there (a bound pod's,
  one an allocated claim holds);
- no device of the class is free while the whole node is taken (the All request was
  charged the fewest devices a node offers, but the allocator gave it all of them).

Only "free now" is tied: "could ever run" sees the allocatable amounts, where the
whole node is 1 and every device free.

Pure: names and amounts in, amounts out; imports only `model`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..model import DEVICE_RESOURCE_PREFIX, WHOLE_NODE_SUFFIX


def free_of(resource: str, amount: int, used: Mapping[str, int]) -> int:
    """What is free of `resource` (`amount` allocatable) on a node using `used`."""
    free = amount - used.get(resource, 0)
    if free <= 0:
        return 0
    if not used or not resource.startswith(DEVICE_RESOURCE_PREFIX):
        return free
    if resource.endswith(WHOLE_NODE_SUFFIX):
        return 0 if used.get(resource[: -len(WHOLE_NODE_SUFFIX)], 0) > 0 else free
    return 0 if used.get(resource + WHOLE_NODE_SUFFIX, 0) > 0 else free


def free_amounts(allocatable: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    """`free_of` every resource of `allocatable`."""
    return {r: free_of(r, a, used) for r, a in allocatable.items()}
