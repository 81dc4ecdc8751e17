"""How many devices of a class a node offers, or that this cannot be known.

A device counts toward a class when every CEL selector of the class accepts it
(`classes.selects`). The count is `UNKNOWN` when some device the class might take
cannot be counted: its selectors could not be evaluated here, or it is partitionable,
shareable or tainted (`Device.countable`). Callers must never refuse a workload on an
unknown count: the scheduler may well find room that a device count cannot see.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .classes import DeviceClass, SelectorVerdict, selects
from .slices import Device

#: The count when it cannot be known (see the module docstring).
UNKNOWN: Final = None
NodeClassCapacity = int | None


def class_capacity(device_class: DeviceClass, devices: Iterable[Device]) -> NodeClassCapacity:
    """Devices of `device_class` among `devices` (one node's), or UNKNOWN."""
    count = 0
    for device in devices:
        verdict = selects(device_class, device)
        if verdict is SelectorVerdict.REJECTED:
            continue
        if verdict is SelectorVerdict.UNDECIDED or not device.countable:
            return UNKNOWN
        count += 1
    return count
