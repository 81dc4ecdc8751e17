"""ResourceSlices (resource.k8s.io/v1) to the devices a node can be given.

Fields, as `k8s.io/api/resource/v1/types.go` defines them:
- `ResourceSliceSpec`: `driver`, `pool` (`ResourcePool`: `name`, `generation`,
  `resourceSliceCount`), exactly one of `nodeName`, `nodeSelector` (a core/v1
  NodeSelector), `allNodes`, `perDeviceNodeSelection`; `devices[]`; `sharedCounters`.
- `Device`: `name`, `attributes` (qualified name -> `DeviceAttribute`, one of `int`,
  `bool`, `string`, `version`), `capacity` (qualified name -> `DeviceCapacity.value`,
  a quantity), `consumesCounters`, `nodeName`/`nodeSelector`/`allNodes` (with
  perDeviceNodeSelection), `allowMultipleAllocations`, `taints`, `bindingConditions`.

Which slices count for a node follows kube-scheduler's allocator, as read in
`staging/src/k8s.io/dynamic-resource-allocation/structured/internal/stable/pools_stable.go`
(`GatherPools`, `addSlice`, `poolIsInvalid`; resource/v1): slices are grouped by
(driver, pool) among those that select the node (slices with `sharedCounters` always
count); a slice of an older `pool.generation` than another of its pool is out-dated and
dropped, a newer one replaces the older. A pool is incomplete when its slices of the
newest generation are not as many as its `resourceSliceCount` (`!=`: fewer, or more
while a driver rewrites it), and invalid when a device name appears twice in it
(`InvalidReason` "duplicate device name"); `allocator_stable.go` skips both
(`pool.IsIncomplete || pool.IsInvalid`), so neither do we count their devices.

A pool whose slices each target another node (one slice per node, one pool) is whole
although a node sees only its own slice: since Kubernetes 1.35 (kubernetes#134466,
multi-node pools) the allocator counts the pool's slices of its generation over every
node, and a newer generation anywhere makes a node's older slices out-dated. Given
`pool_states` (every slice, once per pass), `node_devices` judges completeness and the
newest generation so; without it, from the node's own slices as before.

Pure: plain dicts in, frozen dataclasses out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..eligibility import term_matches
from ..errors import InvalidObject
from ..model import NodeSelectorTerm
from ..podspec import _term, as_list, as_mapping, as_str, field_path

#: A device attribute's value in CEL: `DeviceAttribute` has exactly one of these set.
_ATTRIBUTE_KINDS = ("int", "bool", "string", "version")


@dataclass(frozen=True)
class Device:
    """One device of a slice, in the shape its class's CEL selectors see it."""

    driver: str
    pool: str
    name: str
    #: domain -> attribute name -> value; an unqualified name is the driver's domain.
    attributes: Mapping[str, Mapping[str, object]]
    #: domain -> capacity name -> the quantity as written (CEL `quantity` is not
    #: available, see classes.py).
    capacity: Mapping[str, Mapping[str, str]]
    #: False when the device may be split or shared, or is tainted: partitionable
    #: devices (`consumesCounters`), consumable capacity (`allowMultipleAllocations`)
    #: and device taints make "how many claims fit" more than a device count, so a
    #: node offering such a device to a class has an unknown capacity for it.
    countable: bool


@dataclass(frozen=True)
class _Selection:
    """Where a slice (or, with perDeviceNodeSelection, a device) may be used."""

    node_name: str = ""
    all_nodes: bool = False
    terms: tuple[NodeSelectorTerm, ...] | None = None

    def matches(self, node: str, labels: Mapping[str, str]) -> bool:
        if self.node_name:
            return node == self.node_name
        if self.all_nodes:
            return True
        if self.terms is not None:
            return any(term_matches(t, node, labels) for t in self.terms)
        return False


@dataclass(frozen=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    #: None with perDeviceNodeSelection: each device says where it may go.
    selection: _Selection | None
    shared_counters: bool
    devices: tuple[tuple[Device, _Selection | None], ...]


def _int(value: object, path: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObject(path, f"must be an integer, got {value!r}")
    if value < minimum:
        raise InvalidObject(path, f"must be at least {minimum}, got {value}")
    return value


def _selection(body: Mapping[str, Any], path: str) -> _Selection | None:
    """`nodeName`/`nodeSelector`/`allNodes` of a slice or device; None: none given."""
    node_name = as_str(body.get("nodeName"), field_path(path, "nodeName"), default="")
    all_nodes = body.get("allNodes") is True
    raw_selector = body.get("nodeSelector")
    if raw_selector is not None:
        selector_path = field_path(path, "nodeSelector")
        terms_path = field_path(selector_path, "nodeSelectorTerms")
        raw_terms = as_list(as_mapping(raw_selector, selector_path).get("nodeSelectorTerms"),
                            terms_path)
        terms = tuple(_term(t, field_path(terms_path, i)) for i, t in enumerate(raw_terms))
        return _Selection(terms=terms)
    if node_name or all_nodes:
        return _Selection(node_name=node_name, all_nodes=all_nodes)
    return None


def _attributes(raw: object, driver: str, path: str) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for key, attribute in as_mapping(raw, path).items():
        attribute_path = field_path(path, str(key))
        body = as_mapping(attribute, attribute_path, required=True)
        given = [k for k in _ATTRIBUTE_KINDS if k in body]
        if len(given) != 1:
            raise InvalidObject(
                attribute_path, f"must set exactly one of {', '.join(_ATTRIBUTE_KINDS)}"
            )
        domain, _, name = str(key).rpartition("/")
        out.setdefault(domain or driver, {})[name] = body[given[0]]
    return out


def _capacity(raw: object, driver: str, path: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for key, entry in as_mapping(raw, path).items():
        entry_path = field_path(path, str(key))
        value = as_mapping(entry, entry_path, required=True).get("value")
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            raise InvalidObject(field_path(entry_path, "value"), "must be a quantity")
        domain, _, name = str(key).rpartition("/")
        out.setdefault(domain or driver, {})[name] = str(value)
    return out


def _device(
    raw: object, driver: str, pool: str, path: str, per_device: bool
) -> tuple[Device, _Selection | None]:
    body = as_mapping(raw, path, required=True)
    name = as_str(body.get("name"), field_path(path, "name"))
    countable = not (
        as_list(body.get("consumesCounters"), field_path(path, "consumesCounters"))
        or body.get("allowMultipleAllocations") is True
        or as_list(body.get("taints"), field_path(path, "taints"))
    )
    device = Device(
        driver=driver,
        pool=pool,
        name=name,
        attributes=_attributes(body.get("attributes"), driver, field_path(path, "attributes")),
        capacity=_capacity(body.get("capacity"), driver, field_path(path, "capacity")),
        countable=countable,
    )
    return device, (_selection(body, path) if per_device else None)


def read_resource_slice(obj: Mapping[str, Any], path: str = "") -> ResourceSlice:
    """One ResourceSlice; bad fields raise InvalidObject naming the slice and field."""
    name = as_str(as_mapping(obj.get("metadata"), "metadata").get("name"), "metadata.name",
                  default="")
    base = path or f"ResourceSlice {name or '?'}"
    spec_path = f"{base}: spec"
    spec = as_mapping(obj.get("spec"), spec_path, required=True)
    driver = as_str(spec.get("driver"), field_path(spec_path, "driver"))
    pool_path = field_path(spec_path, "pool")
    pool = as_mapping(spec.get("pool"), pool_path, required=True)
    per_device = spec.get("perDeviceNodeSelection") is True
    selection = None if per_device else _selection(spec, spec_path)
    pool_name = as_str(pool.get("name"), field_path(pool_path, "name"))
    devices_path = field_path(spec_path, "devices")
    return ResourceSlice(
        name=name,
        driver=driver,
        pool=pool_name,
        generation=_int(pool.get("generation", 0), field_path(pool_path, "generation"),
                        minimum=0),
        slice_count=_int(pool.get("resourceSliceCount"),
                         field_path(pool_path, "resourceSliceCount"), minimum=1),
        selection=selection,
        shared_counters=bool(as_list(spec.get("sharedCounters"),
                                     field_path(spec_path, "sharedCounters"))),
        devices=tuple(
            _device(d, driver, pool_name, field_path(devices_path, i), per_device)
            for i, d in enumerate(as_list(spec.get("devices"), devices_path))
        ),
    )  # fmt: skip


def _selects_node(piece: ResourceSlice, node: str, labels: Mapping[str, str]) -> bool:
    if piece.shared_counters:
        return True  # counter sets belong to the pool, whichever node asks
    if piece.selection is not None:
        return piece.selection.matches(node, labels)
    return any(s is not None and s.matches(node, labels) for _d, s in piece.devices)


def _has_duplicate_names(pool: list[ResourceSlice]) -> bool:
    """`poolIsInvalid`: a device name listed twice among a pool's slices."""
    seen: set[str] = set()
    for piece in pool:
        for device, _own in piece.devices:
            if device.name in seen:
                return True
            seen.add(device.name)
    return False


@dataclass(frozen=True)
class PoolState:
    """A pool over every node: its newest generation, how many slices of it exist, and
    the `resourceSliceCount`s they give."""

    generation: int
    slices: int
    counts: frozenset[int]

    @property
    def complete(self) -> bool:
        # Slices of one generation that disagree on the count: see `node_devices`.
        return self.slices in self.counts


def pool_states(slices: Iterable[ResourceSlice]) -> dict[tuple[str, str], PoolState]:
    """Every pool's `PoolState` (module docstring), by (driver, pool)."""
    newest: dict[tuple[str, str], list[ResourceSlice]] = {}
    for piece in slices:
        held = newest.setdefault((piece.driver, piece.pool), [])
        if held and piece.generation < held[0].generation:
            continue
        if held and piece.generation > held[0].generation:
            held.clear()
        held.append(piece)
    return {key: PoolState(held[0].generation, len(held),
                           frozenset(p.slice_count for p in held))
            for key, held in newest.items()}


def node_devices(
    slices: Iterable[ResourceSlice], node: str, labels: Mapping[str, str],
    states: Mapping[tuple[str, str], PoolState] | None = None,
) -> list[Device]:
    """The devices `node` can be allocated: those of complete, valid pools, newest
    generation (module docstring); `states`: `pool_states` of every slice (default: of
    the slices given)."""
    slices = list(slices)
    if states is None:
        states = pool_states(slices)
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for piece in slices:
        if not _selects_node(piece, node, labels):
            continue
        held = pools.setdefault((piece.driver, piece.pool), [])
        if held and piece.generation < held[0].generation:
            continue  # out-dated
        if held and piece.generation > held[0].generation:
            held.clear()  # a newer generation replaces every older slice
        held.append(piece)
    devices: list[Device] = []
    for key, held in pools.items():
        # Incomplete: the allocator does not allocate from it. Slices of one generation
        # that disagree on the count are a driver mid-update; the allocator takes the
        # first one's, an order we do not have, so the pool counts when any of theirs
        # makes it complete: a device counted too many at worst lets a gang wait, one
        # too few would refuse it.
        state = states.get(key)
        if state is None or held[0].generation < state.generation or not state.complete:
            continue  # out-dated by a slice elsewhere, or the pool is incomplete
        if _has_duplicate_names(held):
            continue  # invalid: the allocator allocates nothing from it
        for piece in held:
            devices += [
                d for d, own in piece.devices
                if (piece.selection or own or _Selection()).matches(node, labels)
            ]  # fmt: skip
    return devices
