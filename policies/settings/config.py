"""gangkeeper's configuration: parsed and checked from the mapping a ConfigMap holds.

`load_config(mapping)` turns plain data (already parsed from YAML by the caller) into
a frozen `Config`. Unknown keys and bad values raise InvalidConfig naming the key, so
a typo in the ConfigMap is reported instead of silently ignored. Pure: no file or
network access; reading the file is the caller's job.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast, get_args

from ..errors import InvalidConfig, InvalidObject
from ..model import DEVICE_RESOURCE_PREFIX, WHOLE_NODE_SUFFIX, Backend, Taint
from ..quantity import gpu_count, parse_quantity
from .autoscaling import KEYS as AUTOSCALING_KEYS
from .autoscaling import Autoscaling, load_autoscaling
from .checks import (
    choice,
    count,
    flag,
    given,
    label_value,
    listed,
    mapping,
    reject_unknown,
    string,
    switch,
)

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

#: Node labels whose value is unique per node; kept out of capacity shapes.
DEFAULT_NODE_IDENTITY_LABELS: tuple[str, ...] = ("kubernetes.io/hostname",)

ConflictPolicy = Literal["skip", "reject"]
UnreadablePolicy = Literal["allow", "reject"]
#: How a TrainJob's `resourcesPerNode` meets the runtime's container resources:
#: Trainer ≤ v2.2 replaces them, v2.3+ merges per resource (kubeflow/trainer#3602).
TrainerResources = Literal["replace", "merge"]
#: Who picks each released member's node (gate backend): gangkeeper's assigner, which
#: pins the member in the patch that lifts the gate, or the scheduler's scoring.
PlacementPolicy = Literal["pinned", "scheduler"]
#: What the watchdog recreates when released members stay unbound (`rebindSeconds`):
#: `members` only the stuck ones, `gang` every member, `auto` the stuck ones unless
#: they would find no room beside the members that stay (then the whole gang). A Job
#: is always requeued whole (suspended and resumed: `release.recovery`).
RebindScope = Literal["auto", "members", "gang"]
#: Whether a waiting gate-backend gang may preempt pods of lower priority
#: (`release.preemption`): `lowerPriority` (as kube-scheduler does for a pod whose
#: PriorityClass allows it) or `off`.
PreemptionPolicy = Literal["lowerPriority", "off"]


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
    #: DRA devices a node of the pool will publish: DeviceClass name -> count per node.
    #: Also in `allocatable`, as `dra:<class>`: the name the live path counts a class's
    #: devices by on a Node (`policies.dra.extended`), so both count alike.
    devices: Mapping[str, int] = field(default_factory=dict)


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
    #: The Trainer release's rule for resourcesPerNode. "replace" (v2.2.0, the
    #: release the sandbox runs) never counts more than the pods ask for under either
    #: rule, so it cannot cause a false rejection on a cluster that merges.
    trainer_resources: TrainerResources = "replace"
    #: After this long incomplete or not fitting, a gang is reported as stuck.
    gang_timeout_seconds: int = 300
    pools: tuple[NodePool, ...] = ()
    #: Node labels unique per node (hostname, instance id, ...). Capacity keeps them out
    #: of node shapes, so identical nodes compress; a placement that reads one of them
    #: is answered node by node.
    node_identity_labels: tuple[str, ...] = DEFAULT_NODE_IDENTITY_LABELS
    #: Placeholder capacity for gangs on autoscaled pools (`policies.autoscaling`).
    autoscaling: Autoscaling = field(default_factory=Autoscaling)
    #: The gate backend's release: `pinned` (each member assigned a node and pinned to
    #: it, so a mixed gang cannot end partly bound) or `scheduler` (gates lifted, the
    #: scheduler places). The other backends always leave placement to their scheduler.
    placement: PlacementPolicy = "pinned"
    #: Per-namespace override of `placement`.
    namespace_placement: Mapping[str, PlacementPolicy] = field(default_factory=dict)
    #: Gang-aware preemption of lower-priority work (`PreemptionPolicy`), by the
    #: preemptor's namespace.
    preemption: PreemptionPolicy = "lowerPriority"
    #: Per-namespace override of `preemption`.
    namespace_preemption: Mapping[str, PreemptionPolicy] = field(default_factory=dict)
    #: A member released pinned and unbound this long is stuck (its node was taken).
    rebind_seconds: int = 60
    #: Times per gang the controller requeues it (stuck members deleted, or its Job
    #: suspended and resumed; for either cause below).
    rebind_retries: int = 3
    #: What a rebind recreates (`RebindScope`).
    rebind_scope: RebindScope = "auto"
    #: A gang bound whole but not all Ready this long after release gets an Event.
    pods_ready_timeout_seconds: int = 600
    #: ... and, when true, is requeued whole (Kueue's waitForPodsReady requeue).
    pods_ready_requeue: bool = False
    #: Node label keys of topology domains, coarse to fine (zone, rack or block, NVLink
    #: clique) that the topology annotations may name.
    topology: tuple[str, ...] = ()
    #: Answers of is_gpu_resource: it runs for every resource of every container and
    #: node, and fnmatch is slow. Not part of the value (compare/repr/hash off).
    _gpu_answers: dict[str, bool] = field(
        default_factory=dict, init=False, compare=False, repr=False, hash=False
    )

    def backend_for(self, namespace: str) -> Backend:
        return self.namespace_backends.get(namespace, self.backend)

    def placement_for(self, namespace: str) -> PlacementPolicy:
        return self.namespace_placement.get(namespace, self.placement)

    def preemption_for(self, namespace: str) -> PreemptionPolicy:
        return self.namespace_preemption.get(namespace, self.preemption)

    def scheduler_name_for(self, backend: Backend) -> str:
        return self.scheduler_names.get(backend, DEFAULT_SCHEDULER_NAMES[backend])

    def is_gpu_resource(self, name: str) -> bool:
        answer = self._gpu_answers.get(name)
        if answer is None:
            answer = any(fnmatch.fnmatchcase(name, pattern) for pattern in self.gpu_resources)
            if len(self._gpu_answers) < 1024:  # bounded: resource names are few
                self._gpu_answers[name] = answer
        return answer


_BACKENDS: tuple[str, ...] = get_args(Backend)
_CONFLICT: tuple[str, ...] = get_args(ConflictPolicy)
_UNREADABLE: tuple[str, ...] = get_args(UnreadablePolicy)
_TRAINER_RESOURCES: tuple[str, ...] = get_args(TrainerResources)
_PLACEMENT: tuple[str, ...] = get_args(PlacementPolicy)
_REBIND_SCOPE: tuple[str, ...] = get_args(RebindScope)
_PREEMPTION: tuple[str, ...] = get_args(PreemptionPolicy)
_KEYS = {
    "backend",
    "namespaceBackends",
    "gpuResources",
    "schedulerNames",
    "onConflict",
    "onUnreadable",
    "gangTimeoutSeconds",
    "pools",
    "nodeIdentityLabels",
    "trainerResourcesPerNode",
    *AUTOSCALING_KEYS,
    "placement",
    "namespacePlacement",
    "preemption",
    "namespacePreemption",
    "rebindSeconds",
    "rebindRetries",
    "rebindScope",
    "podsReadyTimeoutSeconds",
    "podsReadyRequeue",
    "topology",
}
#: The keys a config file may have (the Helm chart's values schema lists the same).
CONFIG_KEYS: frozenset[str] = frozenset(_KEYS)


def _backend(key: str, value: object) -> Backend:
    return cast(Backend, choice(key, value, _BACKENDS))


def _gpus(key: str, value: object) -> int:
    """A whole GPU count, as a number or a Kubernetes quantity string ("8")."""
    if isinstance(value, bool):
        raise InvalidConfig(key, f"must be a whole number of GPUs, got {value!r}")
    try:
        return gpu_count(value, key)
    except InvalidObject as exc:
        raise InvalidConfig(key, exc.message) from exc


def _resource_name(key: str, value: object) -> str:
    name = string(key, value)
    # Device plugins only expose domain-prefixed extended resources (vendor.com/x).
    if "/" not in name or name.startswith("/") or name.endswith("/"):
        raise InvalidConfig(
            key, f"must be an extended resource name such as nvidia.com/gpu, got {name!r}"
        )
    return name


def _amount(key: str, resource: str, value: object, gpu_patterns: tuple[str, ...]) -> int:
    """A pool's allocatable amount: whole for GPUs, any quantity (floored) otherwise."""
    if any(fnmatch.fnmatchcase(resource, p) for p in gpu_patterns):
        return _gpus(key, value)
    if isinstance(value, bool):
        raise InvalidConfig(key, f"must be a quantity, got {value!r}")
    try:
        amount = parse_quantity(value, key)
    except InvalidObject as exc:
        raise InvalidConfig(key, exc.message) from exc
    if amount < 0:
        raise InvalidConfig(key, f"cannot be negative, got {value!r}")
    return math.floor(amount)


def _device_count(key: str, value: object) -> int:
    """A pool's devices of one class per node: a whole number ≥ 1 ("8" as YAML may
    quote it too)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfig(key, f"must be a positive integer, got {value!r}")
    return value


def _devices(key: str, raw: object) -> dict[str, int]:
    """`devices: {<DeviceClass name>: <count per node>}`."""
    return {
        string(key, name): _device_count(f"{key}.{name}", value)
        for name, value in mapping(key, raw).items()
    }


def _pool(key: str, raw: object, gpu_patterns: tuple[str, ...]) -> NodePool:
    data = mapping(key, raw)
    reject_unknown(
        data, ("name", "maxCount", "labels", "taints", "allocatable", "devices"), key,
        list_known=False,
    )
    name = string(f"{key}.name", data.get("name"))
    labels = {
        string(f"{key}.labels", k): label_value(f"{key}.labels.{k}", v)
        for k, v in mapping(f"{key}.labels", given(data, "labels", {})).items()
    }
    taints = []
    for i, t in enumerate(listed(f"{key}.taints", given(data, "taints", []))):
        tk = f"{key}.taints[{i}]"
        tm = mapping(tk, t)
        taints.append(
            Taint(
                key=string(f"{tk}.key", tm.get("key")),
                value=label_value(f"{tk}.value", tm.get("value", "")),
                effect=choice(
                    f"{tk}.effect",
                    tm.get("effect", "NoSchedule"),
                    ("NoSchedule", "PreferNoSchedule", "NoExecute"),
                ),
            )
        )
    allocatable = {
        string(f"{key}.allocatable", k): _amount(f"{key}.allocatable.{k}", str(k), v, gpu_patterns)
        for k, v in mapping(f"{key}.allocatable", given(data, "allocatable", {})).items()
    }
    devices = _devices(f"{key}.devices", given(data, "devices", {}))
    for device_class, amount in devices.items():
        resource = DEVICE_RESOURCE_PREFIX + device_class
        if resource in allocatable:
            raise InvalidConfig(f"{key}.allocatable.{resource}",
                                f"give the devices of DeviceClass {device_class} in {key}.devices")
        allocatable[resource] = amount
        # Each node also offers the class's whole node, which an All request takes
        # (`assigner.whole_nodes`), as a live node offering the class does.
        allocatable[resource + WHOLE_NODE_SUFFIX] = 1
    return NodePool(
        name=name,
        max_count=count(f"{key}.maxCount", data.get("maxCount"), minimum=1),
        labels=labels,
        taints=tuple(taints),
        allocatable=allocatable,
        devices=devices,
    )


def _per_namespace(
    data: Mapping[str, Any],
    key: str,
    choices: tuple[str, ...],
    check: Callable[[str, object, tuple[str, ...]], str],
) -> dict[str, str]:
    """A per-namespace override map (`namespacePlacement: {team: pinned}`), each value
    checked by `check` against `choices` and named `key.namespace` when wrong."""
    return {
        string(key, ns): check(f"{key}.{ns}", value, choices)
        for ns, value in mapping(key, given(data, key, {})).items()
    }


def load_config(raw: Mapping[str, Any] | None) -> Config:
    """Build a Config from parsed YAML; None or {} gives the defaults.

    A key given as null (an empty YAML section) takes its default.
    """
    if raw is None:
        return Config()
    data = mapping("<root>", raw)
    reject_unknown(data, _KEYS)
    defaults = Config()
    scheduler_names = dict(DEFAULT_SCHEDULER_NAMES)
    for backend, name in mapping("schedulerNames", given(data, "schedulerNames", {})).items():
        _backend(f"schedulerNames.{backend}", backend)
        scheduler_names[backend] = string(f"schedulerNames.{backend}", name)
    raw_gpu = listed("gpuResources", given(data, "gpuResources", list(DEFAULT_GPU_RESOURCES)))
    gpu = tuple(_resource_name(f"gpuResources[{i}]", r) for i, r in enumerate(raw_gpu))
    if not gpu:
        raise InvalidConfig("gpuResources", "must name at least one resource")
    pools = tuple(
        _pool(f"pools[{i}]", p, gpu)
        for i, p in enumerate(listed("pools", given(data, "pools", [])))
    )
    seen: set[str] = set()
    for i, pool in enumerate(pools):
        if pool.name in seen:
            raise InvalidConfig(f"pools[{i}].name", f"duplicate pool name {pool.name!r}")
        seen.add(pool.name)
    raw_identity = listed(
        "nodeIdentityLabels",
        given(data, "nodeIdentityLabels", list(DEFAULT_NODE_IDENTITY_LABELS)),
    )
    identity = tuple(string(f"nodeIdentityLabels[{i}]", k) for i, k in enumerate(raw_identity))
    namespace_backends = {
        string("namespaceBackends", ns): _backend(f"namespaceBackends.{ns}", b)
        for ns, b in mapping("namespaceBackends", given(data, "namespaceBackends", {})).items()
    }
    return Config(
        backend=_backend("backend", given(data, "backend", defaults.backend)),
        namespace_backends=namespace_backends,
        gpu_resources=gpu,
        scheduler_names=scheduler_names,
        on_conflict=cast(
            ConflictPolicy,
            choice("onConflict", given(data, "onConflict", defaults.on_conflict), _CONFLICT),
        ),
        on_unreadable=cast(
            UnreadablePolicy,
            choice(
                "onUnreadable", given(data, "onUnreadable", defaults.on_unreadable), _UNREADABLE
            ),
        ),
        gang_timeout_seconds=count(
            "gangTimeoutSeconds",
            given(data, "gangTimeoutSeconds", defaults.gang_timeout_seconds),
            1,
        ),
        pools=pools,
        node_identity_labels=identity,
        autoscaling=load_autoscaling(data),
        trainer_resources=cast(
            TrainerResources,
            choice(
                "trainerResourcesPerNode",
                given(data, "trainerResourcesPerNode", defaults.trainer_resources),
                _TRAINER_RESOURCES,
            ),
        ),
        placement=cast(
            PlacementPolicy,
            choice("placement", given(data, "placement", defaults.placement), _PLACEMENT),
        ),
        namespace_placement=cast(
            dict[str, PlacementPolicy],
            _per_namespace(data, "namespacePlacement", _PLACEMENT, choice),
        ),
        preemption=cast(
            PreemptionPolicy,
            switch("preemption", given(data, "preemption", defaults.preemption), _PREEMPTION),
        ),
        namespace_preemption=cast(
            dict[str, PreemptionPolicy],
            _per_namespace(data, "namespacePreemption", _PREEMPTION, switch),
        ),
        rebind_seconds=count(
            "rebindSeconds", given(data, "rebindSeconds", defaults.rebind_seconds), 1
        ),
        rebind_retries=count(
            "rebindRetries", given(data, "rebindRetries", defaults.rebind_retries), 0
        ),
        rebind_scope=cast(
            RebindScope,
            choice(
                "rebindScope", given(data, "rebindScope", defaults.rebind_scope), _REBIND_SCOPE
            ),
        ),
        pods_ready_requeue=flag(
            "podsReadyRequeue", given(data, "podsReadyRequeue", defaults.pods_ready_requeue)
        ),
        topology=tuple(
            string(f"topology[{i}]", k)
            for i, k in enumerate(listed("topology", given(data, "topology", [])))
        ),
        pods_ready_timeout_seconds=count(
            "podsReadyTimeoutSeconds",
            given(data, "podsReadyTimeoutSeconds", defaults.pods_ready_timeout_seconds),
            1,
        ),
    )
