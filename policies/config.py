"""gangkeeper's configuration: parsed and checked from the mapping a ConfigMap holds.

`load_config(mapping)` turns plain data (already parsed from YAML by the caller) into
a frozen `Config`. Unknown keys and bad values raise InvalidConfig naming the key, so
a typo in the ConfigMap is reported instead of silently ignored. Pure: no file or
network access; reading the file is the caller's job.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from .errors import InvalidConfig
from .model import Backend, Taint

DEFAULT_GPU_RESOURCES: tuple[str, ...] = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "nvidia.com/mig-*",
)

DEFAULT_SCHEDULER_NAMES: Mapping[str, str] = {
    "gate": "default-scheduler",
    "coscheduling": "scheduler-plugins-scheduler",
    "volcano": "volcano",
    "native": "default-scheduler",
}

ConflictPolicy = Literal["skip", "reject"]
UnreadablePolicy = Literal["allow", "reject"]


@dataclass(frozen=True)
class NodePool:
    """A node group that can scale up to `max_count` nodes of one template.

    Counts as capacity even with zero nodes now, so a pool scaled to zero does not
    make every gang look impossible.
    """

    name: str
    max_count: int
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    backend: Backend = "gate"
    namespace_backends: Mapping[str, Backend] = field(default_factory=dict)
    gpu_resources: tuple[str, ...] = DEFAULT_GPU_RESOURCES
    scheduler_names: Mapping[str, str] = field(
        default_factory=lambda: dict(DEFAULT_SCHEDULER_NAMES)
    )
    #: What to do with a pod that already carries another gang system's keys.
    on_conflict: ConflictPolicy = "skip"
    #: What to do with an object the policy cannot read (admission answer).
    on_unreadable: UnreadablePolicy = "allow"
    #: After this long incomplete or not fitting, a gang is reported as stuck.
    gang_timeout_seconds: int = 300
    pools: tuple[NodePool, ...] = ()

    def backend_for(self, namespace: str) -> Backend:
        return self.namespace_backends.get(namespace, self.backend)

    def scheduler_name_for(self, backend: Backend) -> str:
        return self.scheduler_names.get(backend, DEFAULT_SCHEDULER_NAMES[backend])

    def is_gpu_resource(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.gpu_resources)


_BACKENDS: tuple[str, ...] = get_args(Backend)
_CONFLICT: tuple[str, ...] = get_args(ConflictPolicy)
_UNREADABLE: tuple[str, ...] = get_args(UnreadablePolicy)
_KEYS = {
    "backend",
    "namespaceBackends",
    "gpuResources",
    "schedulerNames",
    "onConflict",
    "onUnreadable",
    "gangTimeoutSeconds",
    "pools",
}


def _backend(key: str, value: object) -> Backend:
    if value not in _BACKENDS:
        raise InvalidConfig(key, f"must be one of {', '.join(_BACKENDS)}, got {value!r}")
    return cast(Backend, value)


def _mapping(key: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidConfig(key, f"must be a mapping, got {type(value).__name__}")
    return value


def _list(key: str, value: object) -> list[Any]:
    if not isinstance(value, list):
        raise InvalidConfig(key, f"must be a list, got {type(value).__name__}")
    return value


def _string(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidConfig(key, f"must be a non-empty string, got {value!r}")
    return value


def _count(key: str, value: object, minimum: int = 0) -> int:
    # bool is an int in Python; `true` in YAML is never a count.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidConfig(key, f"must be a whole number ≥ {minimum}, got {value!r}")
    return value


def _choice(key: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InvalidConfig(key, f"must be one of {', '.join(choices)}, got {value!r}")
    assert isinstance(value, str)
    return value


def _label_value(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidConfig(key, f"must be a string, got {value!r}")
    return value


def _pool(key: str, raw: object) -> NodePool:
    data = _mapping(key, raw)
    unknown = set(data) - {"name", "maxCount", "labels", "taints", "allocatable"}
    if unknown:
        raise InvalidConfig(f"{key}.{sorted(unknown)[0]}", "unknown key")
    name = _string(f"{key}.name", data.get("name"))
    labels = {
        _string(f"{key}.labels", k): _label_value(f"{key}.labels.{k}", v)
        for k, v in _mapping(f"{key}.labels", data.get("labels", {})).items()
    }
    taints = []
    for i, t in enumerate(_list(f"{key}.taints", data.get("taints", []))):
        tk = f"{key}.taints[{i}]"
        tm = _mapping(tk, t)
        taints.append(
            Taint(
                key=_string(f"{tk}.key", tm.get("key")),
                value=str(tm.get("value", "")),
                effect=_choice(
                    f"{tk}.effect",
                    tm.get("effect", "NoSchedule"),
                    ("NoSchedule", "PreferNoSchedule", "NoExecute"),
                ),
            )
        )
    allocatable = {
        _string(f"{key}.allocatable", k): _count(f"{key}.allocatable.{k}", v)
        for k, v in _mapping(f"{key}.allocatable", data.get("allocatable", {})).items()
    }
    return NodePool(
        name=name,
        max_count=_count(f"{key}.maxCount", data.get("maxCount"), minimum=1),
        labels=labels,
        taints=tuple(taints),
        allocatable=allocatable,
    )


def load_config(raw: Mapping[str, Any] | None) -> Config:
    """Build a Config from parsed YAML; None or {} gives the defaults."""
    if raw is None:
        return Config()
    data = _mapping("<root>", raw)
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise InvalidConfig(unknown[0], f"unknown key (known: {', '.join(sorted(_KEYS))})")
    defaults = Config()
    scheduler_names = dict(DEFAULT_SCHEDULER_NAMES)
    for backend, name in _mapping("schedulerNames", data.get("schedulerNames", {})).items():
        _backend(f"schedulerNames.{backend}", backend)
        scheduler_names[backend] = _string(f"schedulerNames.{backend}", name)
    raw_gpu = _list("gpuResources", data.get("gpuResources", list(DEFAULT_GPU_RESOURCES)))
    gpu = tuple(_string(f"gpuResources[{i}]", r) for i, r in enumerate(raw_gpu))
    if not gpu:
        raise InvalidConfig("gpuResources", "must name at least one resource")
    return Config(
        backend=_backend("backend", data.get("backend", defaults.backend)),
        namespace_backends={
            _string("namespaceBackends", ns): _backend(f"namespaceBackends.{ns}", b)
            for ns, b in _mapping("namespaceBackends", data.get("namespaceBackends", {})).items()
        },
        gpu_resources=gpu,
        scheduler_names=scheduler_names,
        on_conflict=cast(
            ConflictPolicy,
            _choice("onConflict", data.get("onConflict", defaults.on_conflict), _CONFLICT),
        ),
        on_unreadable=cast(
            UnreadablePolicy,
            _choice("onUnreadable", data.get("onUnreadable", defaults.on_unreadable), _UNREADABLE),
        ),
        gang_timeout_seconds=_count(
            "gangTimeoutSeconds", data.get("gangTimeoutSeconds", defaults.gang_timeout_seconds), 1
        ),
        pools=tuple(
            _pool(f"pools[{i}]", p) for i, p in enumerate(_list("pools", data.get("pools", [])))
        ),
    )
