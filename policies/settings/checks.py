"""The value checks every config loader shares (settings/config.py, settings/autoscaling.py).

Each takes the key it reports (a dotted path such as `placeholders.image`) and the
raw value, and returns the value typed, or raises InvalidConfig naming that key.
The messages are part of the interface: the chart's docs and the tests quote them.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InvalidConfig


def given(data: Mapping[str, Any], key: str, default: object) -> Any:
    """data[key], or the default when absent or null (an empty YAML section)."""
    value = data.get(key)
    return default if value is None else value


def reject_unknown(
    data: Mapping[Any, Any], known: Iterable[str], prefix: str = "", *, list_known: bool = True
) -> None:
    """InvalidConfig naming the first key of `data` (sorted) that is not `known`."""
    known = frozenset(known)
    unknown = sorted(str(k) for k in set(data) - known)
    if unknown:
        where = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        listed = f" (known: {', '.join(sorted(known))})" if list_known else ""
        raise InvalidConfig(where, f"unknown key{listed}")


def mapping(key: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidConfig(key, f"must be a mapping, got {type(value).__name__}")
    return value


def section(data: Mapping[str, Any], key: str, known: frozenset[str]) -> Mapping[str, Any]:
    """The sub-mapping `data[key]` ({} when absent), holding only `known` keys."""
    value = given(data, key, {})
    if not isinstance(value, Mapping):
        raise InvalidConfig(key, f"must be a mapping, got {value!r}")
    reject_unknown(value, known, key)
    return value


def listed(key: str, value: object) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidConfig(key, f"must be a list, got {type(value).__name__}")
    return value


def string(key: str, value: object) -> str:
    """A string with something in it: a name, an image, a label key."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidConfig(key, f"must be a non-empty string, got {value!r}")
    return value


def label_value(key: str, value: object) -> str:
    """Any string, the empty one included (a label or taint value)."""
    if not isinstance(value, str):
        raise InvalidConfig(key, f"must be a string, got {value!r}")
    return value


def count(key: str, value: object, minimum: int = 0, *, what: str = "whole number") -> int:
    # bool is an int in Python; `true` in YAML is never a count.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidConfig(key, f"must be a {what} ≥ {minimum}, got {value!r}")
    return value


def flag(key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidConfig(key, f"must be true or false, got {value!r}")
    return value


def choice(key: str, value: object, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidConfig(key, f"must be one of {', '.join(choices)}, got {value!r}")
    return value


def switch(key: str, value: object, choices: tuple[str, ...]) -> str:
    """`choice` for a setting one of whose values is `off`: YAML 1.1 (PyYAML) reads an
    unquoted `off` as false, which is what the user wrote."""
    return choice(key, "off" if value is False else value, choices)
