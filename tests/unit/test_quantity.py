"""Kubernetes quantities and whole GPU counts (policies/quantity.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.quantity import MAX_GPUS_PER_POD, gpu_count, parse_quantity

PATH = 'spec.containers[0].resources.limits["nvidia.com/gpu"]'


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)),
        ("2", Fraction(2)),
        ("500m", Fraction(1, 2)),
        ("1.5", Fraction(3, 2)),
        ("1Ki", Fraction(1024)),
        ("2Mi", Fraction(2 * 1024**2)),
        ("1k", Fraction(1000)),
        ("3G", Fraction(3 * 10**9)),
        ("2e3", Fraction(2000)),
        ("1E-1", Fraction(1, 10)),
        ("250u", Fraction(1, 4000)),
        ("+4", Fraction(4)),
        ("-1", Fraction(-1)),
        (".5", Fraction(1, 2)),
        (" 8 ", Fraction(8)),
        (7, Fraction(7)),
        (0.25, Fraction(1, 4)),
        (1.1, Fraction(11, 10)),
    ],
)
def test_quantities_parse_to_their_exact_value(text: object, value: Fraction) -> None:
    assert parse_quantity(text, PATH) == value


@pytest.mark.parametrize(
    "junk", ["", "abc", "1.2.3", "1Kb", "1 Gi", "1e999999", "--1", "0x10", True, None, [1], {}]
)
def test_junk_is_an_error_naming_the_field(junk: object) -> None:
    with pytest.raises(InvalidObject) as error:
        parse_quantity(junk, PATH)
    assert error.value.path == PATH
    assert PATH in str(error.value)


def test_infinite_and_nan_floats_are_not_quantities() -> None:
    for value in (float("inf"), float("nan")):
        with pytest.raises(InvalidObject):
            parse_quantity(value, PATH)


@pytest.mark.parametrize(
    ("value", "count"),
    [(1, 1), ("8", 8), ("0", 0), (0, 0), ("1000m", 1), ("2e0", 2), (4.0, 4), ("1Ki", 1024)],
)
def test_whole_gpu_amounts_are_counted(value: object, count: int) -> None:
    assert gpu_count(value, PATH) == count


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("1.5", "whole"),
        ("500m", "whole"),
        (0.5, "whole"),
        ("-1", "negative"),
        (-2, "negative"),
        ("2M", "more than"),
        (MAX_GPUS_PER_POD + 1, "more than"),
        ("lots", "not a valid quantity"),
        (True, "quantity"),
    ],
)
def test_fractional_negative_huge_or_garbage_gpus_are_rejected(value: object, words: str) -> None:
    with pytest.raises(InvalidObject) as error:
        gpu_count(value, PATH)
    assert error.value.path == PATH
    assert words in error.value.message


def test_the_largest_sane_count_is_accepted() -> None:
    assert gpu_count(MAX_GPUS_PER_POD, PATH) == MAX_GPUS_PER_POD
