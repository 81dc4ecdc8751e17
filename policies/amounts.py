"""Amounts of resources per name (GPUs, devices, cpu, the pod slot), added up.

Pure: mappings in, a new dict out; imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Mapping


def plus(amounts: Mapping[str, int], more: Mapping[str, int]) -> dict[str, int]:
    """`amounts` with `more` added, name by name: `amounts`' names first, in their
    order (a plan reads them in order), then the names only `more` has."""
    return {**amounts, **{r: amounts.get(r, 0) + n for r, n in more.items()}}
