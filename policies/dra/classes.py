"""DeviceClasses (resource.k8s.io/v1) and which devices their selectors accept.

`DeviceClassSpec` (`k8s.io/api/resource/v1/types.go`): `selectors[]` (each a
`DeviceSelector` with `cel.expression`; all must accept a device), `config`
(ignored here), `extendedResourceName` (the class also serves pods that ask for
that extended resource in their limits; KEP-5004).

A selector sees the variable `device` with `driver`, `attributes[domain][name]` and
`capacity[domain][name]`, as the API documents for `CELDeviceSelector` (not its
`allowMultipleAllocations`: such a device is not counted anyway, see slices.py). It
is evaluated with the `common-expression-language` package (Python bindings of the
cel-rust interpreter; see pyproject.toml), which implements standard CEL but none of
the Kubernetes extension libraries: `quantity()` and `semver()` (and so comparing a
capacity or a version attribute), the Kubernetes string and list extensions. An
expression using them, or failing on a device for any other reason (a missing
attribute, a non-boolean result), gives `UNDECIDED` for that device, never a "no":
the caller then does not know what the node offers the class.

Why that package: it is a maintained implementation of CEL (0.10.0 at the time of
writing), shipped as binary wheels (built from Rust with maturin; Python >= 3.11, as
gangkeeper), so selectors are parsed and evaluated by a real CEL implementation, with
no parser of our own. cel-python (`celpy`) is the pure Python alternative ("Pure Python
implementation of Google Common Expression Language", its PyPI summary); Kubernetes'
CEL libraries live in Go (`k8s.io/apiserver/pkg/cel/library`), and neither package was
measured against the other here.

Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cel

from ..memo import MISSING, BoundedMemo
from ..podspec import as_list, as_mapping, as_str, field_path
from .slices import Device


class SelectorVerdict(enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class DeviceClass:
    name: str
    #: CEL expressions, all of which must be true for a device of the class.
    selectors: tuple[str, ...]
    #: `spec.extendedResourceName`, or "" when the class sets none.
    extended_resource_name: str = ""


def read_device_class(obj: Mapping[str, Any], path: str = "") -> DeviceClass:
    """One DeviceClass; bad fields raise InvalidObject naming the class and field."""
    name = as_str(as_mapping(obj.get("metadata"), "metadata").get("name"), "metadata.name")
    spec_path = f"{path or f'DeviceClass {name}'}: spec"
    spec = as_mapping(obj.get("spec"), spec_path)
    extended = as_str(spec.get("extendedResourceName"),
                      field_path(spec_path, "extendedResourceName"), default="")
    return DeviceClass(name=name, selectors=cel_expressions(spec, spec_path),
                       extended_resource_name=extended)


def cel_expressions(body: Mapping[str, Any], path: str) -> tuple[str, ...]:
    """The CEL expressions of `body`'s `selectors[]` (each `cel.expression`), as a
    DeviceClass's spec and a request's `exactly` give them; bad fields raise
    InvalidObject naming the field under `path`."""
    selectors_path = field_path(path, "selectors")
    expressions = []
    for i, raw in enumerate(as_list(body.get("selectors"), selectors_path)):
        selector_path = field_path(selectors_path, i)
        cel_path = field_path(selector_path, "cel")
        cel_body = as_mapping(as_mapping(raw, selector_path, required=True).get("cel"),
                              cel_path, required=True)
        expressions.append(as_str(cel_body.get("expression"),
                                  field_path(cel_path, "expression")))
    return tuple(expressions)


#: Compiled selectors by expression text: a cluster has a few DeviceClasses and claim
#: templates, each compiled once; 1,024 distinct expressions at most.
_PROGRAMS: BoundedMemo[str, cel.Program | None] = BoundedMemo(1024)


def _program(expression: str) -> cel.Program | None:
    found = _PROGRAMS.lookup(expression)
    if found is not MISSING:
        return found
    try:
        program: cel.Program | None = cel.compile(expression)
    except ValueError:
        program = None  # Kubernetes' CEL accepts it (the API server did); this one cannot
    _PROGRAMS.put(expression, program)
    return program


def _variables(device: Device) -> dict[str, Any]:
    return {
        "device": {
            "driver": device.driver,
            "attributes": {d: dict(a) for d, a in device.attributes.items()},
            "capacity": {d: dict(c) for d, c in device.capacity.items()},
        }
    }


def selects(device_class: DeviceClass, device: Device) -> SelectorVerdict:
    """Whether every selector of the class accepts the device, or that CEL cannot say."""
    variables = _variables(device)
    for expression in device_class.selectors:
        program = _program(expression)
        if program is None:
            return SelectorVerdict.UNDECIDED
        try:
            answer = program.execute(variables)
        except (RuntimeError, TypeError, ValueError, KeyError, IndexError):
            return SelectorVerdict.UNDECIDED
        if answer is False:
            return SelectorVerdict.REJECTED
        if answer is not True:
            return SelectorVerdict.UNDECIDED
    return SelectorVerdict.ACCEPTED
