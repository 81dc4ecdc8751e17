"""What one pod needs and where it may go, read from a pod spec (a plain dict).

`pod_demand` computes the effective GPU requests the way kube-scheduler does
(k8s.io/component-helpers/resource.PodRequests): the larger of (a) the sum of app
containers plus restartable ("sidecar") init containers and (b) the peak of any
ordinary init container, which runs together with the sidecars started before it;
then pod overhead is added. `pod_requests` applies the same rule to every resource
the scheduler checks (cpu, memory, ephemeral-storage, extended), for placement.
`placement_of` reads the hard constraints that limit the
eligible nodes: nodeSelector, required node affinity, tolerations (and nodeName).

Also home of the small typed field readers (`as_mapping`, `as_list`, `as_str`,
`field_path`) the recognisers share, so every malformed field raises InvalidObject
with the same kind of path: `spec.containers[0].resources.limits["nvidia.com/gpu"]`.

Pure: plain dicts in, dicts and frozen dataclasses out; no I/O, stdlib only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, cast, get_args

from .errors import InvalidObject
from .model import JSON_OBJECT, NodeSelectorTerm, Operator, Placement, Requirement, Toleration
from .quantity import gpu_count, parse_quantity
from .settings.config import Config


def field_path(base: str, key: str | int) -> str:
    """`base.key`, `base[3]` or `base["nvidia.com/gpu"]` — how messages name a field."""
    # Built eagerly (an error must name its field) for every field of every pod, so
    # kept cheap enough to need no memo: an ASCII identifier is a plain key
    # ([A-Za-z_][A-Za-z0-9_]*), tested without a regex.
    if isinstance(key, int):
        return f"{base}[{key}]"
    if key.isascii() and key.isidentifier():
        return f"{base}.{key}" if base else key
    return f'{base}["{key}"]'


def as_mapping(value: object, path: str, *, required: bool = False) -> Mapping[str, Any]:
    """A JSON object at `path`; an absent (None) field is {} unless required."""
    if value is None:
        if required:
            raise InvalidObject(path, "is required")
        return {}
    if not isinstance(value, JSON_OBJECT):
        raise InvalidObject(path, f"must be an object, got {type(value).__name__}")
    return value


def as_list(value: object, path: str, *, required: bool = False) -> list[Any]:
    """A JSON array at `path`; an absent (None) field is [] unless required."""
    if value is None:
        if required:
            raise InvalidObject(path, "is required")
        return []
    if not isinstance(value, list):
        raise InvalidObject(path, f"must be a list, got {type(value).__name__}")
    return value


def as_str(value: object, path: str, *, default: str | None = None) -> str:
    """A string at `path`; absent gives `default`, or an error when there is none."""
    if value is None:
        if default is None:
            raise InvalidObject(path, "is required")
        return default
    if not isinstance(value, str):
        raise InvalidObject(path, f"must be a string, got {type(value).__name__} {value!r}")
    return value


#: Reads one request: (resource name, quantity, field path) to a whole amount.
_Amount = Callable[[str, object, str], int]


def _container_requests(
    container: object, path: str, keep: Callable[[str], bool], amount: _Amount
) -> dict[str, int]:
    """Requests of one container for the resources `keep` accepts; a resource set only
    in limits counts as requested.

    The API server defaults requests to limits when requests are absent (and for
    extended resources requests must equal limits), so a limits-only amount is a
    request.
    """
    body = as_mapping(container, path, required=True)
    resources_path = field_path(path, "resources")
    resources = as_mapping(body.get("resources"), resources_path)
    requests_path = field_path(resources_path, "requests")
    limits_path = field_path(resources_path, "limits")
    requests = as_mapping(resources.get("requests"), requests_path)
    limits = as_mapping(resources.get("limits"), limits_path)
    found: dict[str, int] = {}
    for source, source_path in ((limits, limits_path), (requests, requests_path)):
        # requests last, so a request wins over a limit of the same name.
        for name, raw in source.items():
            if isinstance(name, str) and keep(name):
                found[name] = amount(name, raw, field_path(source_path, name))
    return found


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = max(into.get(name, 0), amount)


def _effective(
    spec: object, path: str, keep: Callable[[str], bool], amount: _Amount
) -> dict[str, int]:
    """Effective per-pod requests of the kept resources, zeros omitted (the module
    docstring gives the rule)."""
    body = as_mapping(spec, path, required=True)
    containers_path = field_path(path, "containers")
    containers = as_list(body.get("containers"), containers_path, required=True)
    init_path = field_path(path, "initContainers")
    init_containers = as_list(body.get("initContainers"), init_path)

    running: dict[str, int] = {}
    for i, container in enumerate(containers):
        _add(running, _container_requests(container, field_path(containers_path, i), keep, amount))

    # Walk init containers in order, as the kubelet starts them: a sidecar keeps
    # running from its start on, so it adds to every later init container's peak and
    # to the app containers; an ordinary init container runs alone with the sidecars
    # started before it.
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, container in enumerate(init_containers):
        item_path = field_path(init_path, i)
        found = _container_requests(container, item_path, keep, amount)
        policy = as_str(
            as_mapping(container, item_path).get("restartPolicy"),
            field_path(item_path, "restartPolicy"),
            default="",
        )
        if policy == "Always":
            _add(running, found)
            _add(sidecars, found)
            _max(init_peak, sidecars)
        else:
            with_sidecars = dict(found)
            _add(with_sidecars, sidecars)
            _max(init_peak, with_sidecars)
    _max(running, init_peak)

    overhead_path = field_path(path, "overhead")
    for name, raw in as_mapping(body.get("overhead"), overhead_path).items():
        if isinstance(name, str) and keep(name):
            running[name] = running.get(name, 0) + amount(
                name, raw, field_path(overhead_path, name)
            )
    return {name: value for name, value in running.items() if value > 0}


def pod_demand(spec: object, config: Config, path: str = "spec") -> dict[str, int]:
    """Effective per-pod GPU requests, per resource name, zeros omitted.

    Each GPU name is its own resource: "nvidia.com/gpu" and "nvidia.com/mig-1g.5gb"
    are never added together.
    """
    return _effective(spec, path, config.is_gpu_resource, lambda _, raw, at: gpu_count(raw, at))


#: The resource every pod takes one of on its node (the scheduler's pod-count check).
PODS_RESOURCE = "pods"


def resource_amount(name: str, raw: object, path: str, config: Config) -> int:
    """A request or allocatable as a whole number in the unit placement compares:
    whole devices for GPUs, millicores for cpu, the quantity rounded up otherwise
    (bytes of memory and ephemeral-storage, counts of other extended resources)."""
    if config.is_gpu_resource(name):
        return gpu_count(raw, path)
    value = parse_quantity(raw, path)
    if value < 0:
        raise InvalidObject(path, f"cannot be negative, got {raw!r}")
    if name == "cpu":
        value *= 1000
    return math.ceil(value)


def pod_requests(spec: object, config: Config, path: str = "spec") -> dict[str, int]:
    """Effective per-pod requests of every resource the scheduler's NodeResourcesFit
    checks (cpu in millicores, memory and ephemeral-storage in bytes, GPUs and other
    extended resources), plus one `pods`; zeros omitted."""
    found = _effective(
        spec, path, lambda name: name != PODS_RESOURCE,
        lambda name, raw, at: resource_amount(name, raw, at, config),
    )
    found[PODS_RESOURCE] = 1
    return found


def other_requests(spec: object, config: Config, path: str = "spec") -> dict[str, int]:
    """`pod_requests` less GPUs and the pod slot: what `Role.requests` holds."""
    return {
        name: amount
        for name, amount in pod_requests(spec, config, path).items()
        if name != PODS_RESOURCE and not config.is_gpu_resource(name)
    }


_OPERATORS: tuple[str, ...] = get_args(Operator)


def _requirement(raw: object, path: str, *, field: bool) -> Requirement:
    body = as_mapping(raw, path, required=True)
    key = as_str(body.get("key"), field_path(path, "key"))
    operator_path = field_path(path, "operator")
    operator = as_str(body.get("operator"), operator_path)
    allowed = ("In", "NotIn") if field else _OPERATORS
    if operator not in allowed:
        raise InvalidObject(operator_path, f"must be one of {', '.join(allowed)}, got {operator!r}")
    values_path = field_path(path, "values")
    values = tuple(
        as_str(v, field_path(values_path, i))
        for i, v in enumerate(as_list(body.get("values"), values_path))
    )
    # The same shape rules the API server enforces, so a verdict never rests on a
    # requirement the scheduler would read differently.
    if operator in ("In", "NotIn") and not values:
        raise InvalidObject(values_path, f"must be non-empty for operator {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidObject(values_path, f"must be empty for operator {operator}")
    if operator in ("Gt", "Lt") and (
        len(values) != 1 or not re.fullmatch(r"[+-]?[0-9]+", values[0])
    ):
        raise InvalidObject(
            values_path, f"must be a single integer for operator {operator}, got {values!r}"
        )
    if field and key != "metadata.name":
        raise InvalidObject(
            field_path(path, "key"), f"only metadata.name is supported, got {key!r}"
        )
    return Requirement(key=key, operator=cast(Operator, operator), values=values)


def _term(raw: object, path: str) -> NodeSelectorTerm:
    body = as_mapping(raw, path, required=True)
    expressions_path = field_path(path, "matchExpressions")
    fields_path = field_path(path, "matchFields")
    return NodeSelectorTerm(
        match_expressions=tuple(
            _requirement(r, field_path(expressions_path, i), field=False)
            for i, r in enumerate(as_list(body.get("matchExpressions"), expressions_path))
        ),
        match_fields=tuple(
            _requirement(r, field_path(fields_path, i), field=True)
            for i, r in enumerate(as_list(body.get("matchFields"), fields_path))
        ),
    )


def _required_terms(body: Mapping[str, Any], path: str) -> tuple[NodeSelectorTerm, ...]:
    affinity_path = field_path(path, "affinity")
    affinity = as_mapping(body.get("affinity"), affinity_path)
    node_path = field_path(affinity_path, "nodeAffinity")
    node_affinity = as_mapping(affinity.get("nodeAffinity"), node_path)
    required_path = field_path(node_path, "requiredDuringSchedulingIgnoredDuringExecution")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return ()
    terms_path = field_path(required_path, "nodeSelectorTerms")
    raw_terms = as_list(as_mapping(required, required_path).get("nodeSelectorTerms"), terms_path)
    # An empty list would mean "no constraint" in a Placement but "matches nothing"
    # to the scheduler; the API server refuses it, so do we.
    if not raw_terms:
        raise InvalidObject(terms_path, "must hold at least one term")
    return tuple(_term(t, field_path(terms_path, i)) for i, t in enumerate(raw_terms))


def _toleration(raw: object, path: str) -> Toleration:
    body = as_mapping(raw, path, required=True)
    operator_path = field_path(path, "operator")
    operator = as_str(body.get("operator"), operator_path, default="Equal") or "Equal"
    if operator not in ("Exists", "Equal"):
        raise InvalidObject(operator_path, f"must be Exists or Equal, got {operator!r}")
    effect_path = field_path(path, "effect")
    effect = as_str(body.get("effect"), effect_path, default="")
    if effect not in ("", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise InvalidObject(
            effect_path, f"must be NoSchedule, PreferNoSchedule or NoExecute, got {effect!r}"
        )
    return Toleration(
        key=as_str(body.get("key"), field_path(path, "key"), default=""),
        operator="Exists" if operator == "Exists" else "Equal",
        value=as_str(body.get("value"), field_path(path, "value"), default=""),
        effect=effect,
    )


def placement_of(spec: object, path: str = "spec") -> Placement:
    """The hard node constraints of a pod spec; soft preferences are left out."""
    body = as_mapping(spec, path, required=True)
    selector_path = field_path(path, "nodeSelector")
    selector = tuple(
        sorted(
            (
                as_str(key, selector_path),
                as_str(value, field_path(selector_path, str(key))),
            )
            for key, value in as_mapping(body.get("nodeSelector"), selector_path).items()
        )
    )
    terms = _required_terms(body, path)
    node_name = as_str(body.get("nodeName"), field_path(path, "nodeName"), default="")
    if node_name:
        # A pod bound by name skips the scheduler but still lands only on that node;
        # that is one more ANDed requirement in every ORed term.
        pin = Requirement(key="metadata.name", operator="In", values=(node_name,))
        terms = tuple(
            NodeSelectorTerm(t.match_expressions, (*t.match_fields, pin)) for t in terms
        ) or (NodeSelectorTerm(match_fields=(pin,)),)
    tolerations_path = field_path(path, "tolerations")
    tolerations = tuple(
        _toleration(t, field_path(tolerations_path, i))
        for i, t in enumerate(as_list(body.get("tolerations"), tolerations_path))
    )
    return Placement(node_selector=selector, required_terms=terms, tolerations=tolerations)
