"""Kubernetes resource quantities ("1", "500m", "1.5", "1Ki", "2e3", 4) as exact numbers.

`parse_quantity` follows the API server's grammar (resource.Quantity): an optional
sign, a decimal number, then one suffix — binary (Ki Mi Gi Ti Pi Ei), decimal SI
(n u m k M G T P E) or a decimal exponent (e3, E-2). `gpu_count` adds the rule for
devices: a GPU is a whole device, so fractional, negative or absurdly large amounts
are errors naming the field, never silently rounded.

Pure: stdlib only, no I/O. Exact arithmetic with Fraction so "0.1" + "0.2" behaves.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from .errors import InvalidObject

#: More GPUs than this in one pod is a typo or an attack, not a request; refusing it
#: also keeps later arithmetic (count x demand) small.
MAX_GPUS_PER_POD = 1_000_000

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"""
    (?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))
    (?:
        (?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)
      | [eE](?P<exponent>[+-]?[0-9]+)
      | (?P<decimal>[numkMGTPE]?)
    )
    """,
    re.VERBOSE,
)
# The API server caps exponents too; without a bound "1e999999999" would make a
# Fraction with a billion digits.
_MAX_EXPONENT = 30


def parse_quantity(value: object, path: str) -> Fraction:
    """The exact value of a quantity given as a string or a JSON number.

    Raises InvalidObject(path, ...) for anything else (bool, None, lists, junk text).
    """
    # bool is an int in Python; `true` in YAML is never a quantity.
    if isinstance(value, bool):
        raise InvalidObject(path, f'must be a quantity such as 1 or "500m", got {value!r}')
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidObject(path, f"must be a finite quantity, got {value!r}")
        # repr gives the shortest text that round-trips, so 1.1 means 11/10, not the
        # binary approximation the float holds.
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise InvalidObject(
            path, f'must be a quantity such as 1 or "500m", got {type(value).__name__}'
        )
    match = _QUANTITY.fullmatch(value.strip())
    if match is None:
        raise InvalidObject(path, f"is not a valid quantity: {value!r}")
    number = Fraction(match["number"])
    if match["binary"] is not None:
        return number * _BINARY[match["binary"]]
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if abs(exponent) > _MAX_EXPONENT:
            raise InvalidObject(path, f"exponent out of range in {value!r}")
        return number * Fraction(10) ** exponent
    return number * _DECIMAL[match["decimal"] or ""]


def gpu_count(value: object, path: str) -> int:
    """A whole, non-negative, sane number of GPUs, or InvalidObject naming `path`."""
    amount = parse_quantity(value, path)
    if amount < 0:
        raise InvalidObject(path, f"a GPU count cannot be negative, got {value!r}")
    if amount.denominator != 1:
        raise InvalidObject(path, f"GPUs are whole devices; {value!r} is not a whole number")
    if amount > MAX_GPUS_PER_POD:
        raise InvalidObject(
            path, f"{value!r} GPUs is more than {MAX_GPUS_PER_POD:,} per pod; refusing it"
        )
    return int(amount)
