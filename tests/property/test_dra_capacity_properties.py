"""Properties of DRA device counting (policies/dra) over generated objects.

Plain dicts shaped as `k8s.io/api/resource/v1/types.go` ResourceSlice and ResourceClaim,
and core/v1 PodResourceClaim (`resourceClaimName`).
"""

from __future__ import annotations

from itertools import permutations
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.dra import (
    UNKNOWN,
    class_capacity,
    node_devices,
    read_claim,
    read_device_class,
    read_resource_slice,
)
from gangkeeper.policies.dra.extended import nodes_with_devices, with_claim_limits
from gangkeeper.policies.dra.shared import charged_once
from gangkeeper.policies.model import Gang, Role, Source
from gangkeeper.policies.podspec import pod_demand
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.device_view import with_device_names

DRIVER = "gpu.example.com"
CLASS = read_device_class({
    "metadata": {"name": "gpus"},
    "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
})  # fmt: skip


@st.composite
def slices(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Slices of a few pools on node-0 or node-1, any generations, maybe incomplete."""
    out = []
    for i in range(draw(st.integers(0, 6))):
        base = draw(st.one_of(st.just(i), st.integers(0, i)))
        out.append({
            "metadata": {"name": f"s{i}"},
            "spec": {
                "driver": draw(st.sampled_from([DRIVER, "nic.example.com"])),
                "nodeName": draw(st.sampled_from(["node-0", "node-1"])),
                "pool": {
                    "name": draw(st.sampled_from(["p", "q"])),
                    "generation": draw(st.integers(0, 2)),
                    "resourceSliceCount": draw(st.integers(1, 3)),
                },
                # Mostly a name of its own; sometimes another slice's (a pool listing
                # a device twice is invalid).
                "devices": [{"name": f"d{base}-{j}"} for j in range(draw(st.integers(0, 8)))],
            },
        })  # fmt: skip
    return out


@settings(max_examples=200, deadline=None)
@given(slices())
def test_a_count_never_exceeds_the_devices_the_nodes_slices_list(raw: list[dict[str, Any]]) -> None:
    read = [read_resource_slice(s) for s in raw]
    counted = class_capacity(CLASS, node_devices(read, "node-0", {}))
    listed = sum(
        len(s["spec"]["devices"]) for s in raw
        if s["spec"]["nodeName"] == "node-0" and s["spec"]["driver"] == DRIVER
    )  # fmt: skip
    assert counted is not UNKNOWN
    assert 0 <= counted <= listed


def gather_pools(raw: list[dict[str, Any]], node: str) -> int:
    """A reference model of kube-scheduler's pool rules, transcribed from
    `k8s.io/dynamic-resource-allocation/structured/internal/stable/pools_stable.go`
    (GatherPools, addSlice, poolIsInvalid) for slices with `nodeName`, in the order
    given, with multi-node pools as since Kubernetes 1.35 (kubernetes#134466): a pool's
    newest generation and whether it is complete are judged over every node's slices,
    its devices and duplicate names over the node's own. The DRIVER's devices of pools
    that are neither incomplete nor invalid."""
    every: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in raw:
        spec = s["spec"]
        held = every.setdefault((spec["driver"], spec["pool"]["name"]), [])
        if held and spec["pool"]["generation"] < held[0]["pool"]["generation"]:
            continue  # out-dated
        if held and spec["pool"]["generation"] > held[0]["pool"]["generation"]:
            held.clear()  # newer, replaces all old slices
        held.append(spec)
    total = 0
    for (driver, _), held in every.items():
        incomplete = len(held) != held[0]["pool"]["resourceSliceCount"]
        names = [d["name"] for spec in held if spec["nodeName"] == node
                 for d in spec["devices"]]
        invalid = len(names) != len(set(names))
        if driver == DRIVER and not incomplete and not invalid:
            total += len(names)
    return total


@settings(max_examples=200, deadline=None)
@given(slices())
def test_the_count_is_the_schedulers_pool_rules_in_the_most_favourable_order(
    raw: list[dict[str, Any]],
) -> None:
    """Only a pool's newest generation counts, and only when it is complete (as many
    slices as `resourceSliceCount`) and valid (no device name twice). Upstream takes
    the count of the first slice it met, so slices of one generation that disagree on
    it make the verdict depend on the order they arrive in; gangkeeper, having no
    order, counts what the most favourable order gives (too many at worst lets a gang
    wait; too few would refuse one that could run). Where they agree, that is the
    count in every order."""
    read = [read_resource_slice(s) for s in raw]
    counted = class_capacity(CLASS, node_devices(read, "node-0", {}))
    assert counted == max(gather_pools(list(order), "node-0") for order in permutations(raw))


@settings(max_examples=200, deadline=None)
@given(slices(), st.booleans())
def test_every_node_gets_the_count_of_every_slice_that_may_select_it(
    raw: list[dict[str, Any]], everywhere: bool
) -> None:
    """`nodes_with_devices` looks only at a node's own named slices and the unnamed
    ones: the count is what every slice gives."""
    if everywhere and raw:  # one pool offered to every node
        raw[0]["spec"] = {**raw[0]["spec"], "allNodes": True}
        del raw[0]["spec"]["nodeName"]
    read = [read_resource_slice(s) for s in raw]
    nodes = [{"metadata": {"name": n}, "status": {"allocatable": {}}}
             for n in ("node-0", "node-1")]  # fmt: skip
    out, _ = nodes_with_devices(nodes, read, [CLASS])
    for node in out:
        counted = class_capacity(CLASS, node_devices(read, node["metadata"]["name"], {}))
        assert node["status"]["allocatable"].get("dra:gpus", "0") == str(counted)


@settings(max_examples=200, deadline=None)
@given(slices(), st.randoms(use_true_random=False))
def test_the_order_slices_arrive_in_does_not_change_the_count(
    raw: list[dict[str, Any]], rnd: Any
) -> None:
    shuffled = list(raw)
    rnd.shuffle(shuffled)
    def counted(order: list[dict[str, Any]]) -> int | None:
        read = [read_resource_slice(s) for s in order]
        return class_capacity(CLASS, node_devices(read, "node-0", {}))
    assert counted(raw) == counted(shuffled)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sets(st.sampled_from(["a", "b", "c"])), max_size=8),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(1, 8), min_size=3),
)
def test_a_shared_claim_counts_once_however_many_pods_name_it(
    named: list[set[str]], sizes: dict[str, int]
) -> None:
    """Pods naming shared ResourceClaims, through the limits admission gives them
    (`with_claim_limits`) and the gang's count (`charged_once`): each claim named by
    any member counts once, and the gang keeps its members."""
    claims = dict(
        read_claim({"metadata": {"name": name}, "spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": "gpus", "count": count}}]}}})
        for name, count in sizes.items()
    )  # fmt: skip
    config = with_device_names(Config())
    roles = []
    for i, names in enumerate(named):
        spec = with_claim_limits({"containers": [{"name": "main"}], "resourceClaims": [
            {"name": n, "resourceClaimName": n} for n in sorted(names)]}, {}, {}, claims)
        roles.append(Role(f"pod-{i}", 1, pod_demand(spec, config)))  # fmt: skip
    gang = Gang("team", "g", len(roles), tuple(roles), Source("v1", "Pod", "team", "g"))
    charged = charged_once(gang)
    assert charged.total_demand().get("dra:gpus", 0) == sum(sizes[n] for n in set().union(*named))
    assert (charged.size, charged.min_member) == (gang.size, gang.min_member)
    assert all("@" not in r for role in charged.roles for r in role.demand)
