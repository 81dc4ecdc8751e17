"""The controller counts DRA devices (GangController(devices=True), kube/device_view.py):
Nodes reach its store with their ResourceSlices' devices as `dra:<class>`, pods ask
their claims' devices, so a gang of 4 x 8 claimed devices on 4 nodes of 8 waits while
one node's devices are taken by a bound pod's claim, and is released whole once they
are free. Without devices it saw members asking nothing and released them at once.

Plain dicts shaped as `k8s.io/api/resource/v1` (ResourceSlice, DeviceClass,
ResourceClaimTemplate) and core/v1 `PodSpec.resourceClaims`; the controller is built,
fed as its informers would feed it, and never started (no thread, no request)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.gangs import T0, members, pod
from kubernetes.client import ApiClient

from gangkeeper.policies.names import TOPOLOGY_REQUIRED_ANNOTATION
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.controller import GangController
from gangkeeper.webhook.kube.informer import object_key

DRIVER = CLASS = "gpu.example.com"
NOW = T0 + 60


ZONE = "topology.kubernetes.io/zone"


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name,
                         "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {},
            "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip


def resource_slice(name: str, devices: int = 8, **device: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", **device}
                                 for i in range(devices)]}}  # fmt: skip


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": CLASS},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "eight-gpus", "namespace": "team"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus",
                 "exactly": {"deviceClassName": CLASS, "count": 8}}]}}}}  # fmt: skip


def template(name: str, **request: Any) -> dict[str, Any]:
    """A ResourceClaimTemplate of one request `gpus` of CLASS with these fields."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "team"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": CLASS, **request}}]}}}}


def claiming(raw: dict[str, Any], claim: dict[str, str] | None = None) -> dict[str, Any]:
    """The pod asking its GPUs through a claim (of TEMPLATE unless `claim` says)
    instead of limits."""
    spec = raw["spec"]
    spec["containers"][0].pop("resources", None)
    spec["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    spec["resourceClaims"] = [
        {"name": "gpus", **(claim or {"resourceClaimTemplateName": "eight-gpus"})}]
    return raw


def controller(*, devices: bool = True, nodes: int = 4,
               labels: dict[str, dict[str, str]] | None = None, config: Config | None = None,
               slices: list[dict[str, Any]] | None = None,
               templates: tuple[dict[str, Any], ...] = ()) -> GangController:
    built = GangController(ApiClient(), config or Config(), namespace="gangkeeper-system",
                           identity="test", devices=devices)
    names = [f"dra-{i}" for i in range(nodes)]
    node_objs = [node(n, (labels or {}).get(n)) for n in names]
    sink = built.devices or built.nodes
    for obj in node_objs:
        sink.upsert(obj)
    sink.relisted({object_key(o) for o in node_objs})
    if built.devices is not None:
        for store, objs in ((built.devices.slices,
                             slices if slices is not None else [resource_slice(n) for n in names]),
                            (built.devices.classes, [DEVICE_CLASS]),
                            (built.devices.templates, [TEMPLATE, *templates])):
            for obj in objs:
                store.upsert(obj)
            store.relisted({object_key(o) for o in objs})
    return built


def decide(built: GangController, pods: list[dict[str, Any]]) -> Plan:
    for raw in pods:
        built.pods.upsert(raw)
    return plan(built.pods.items(), built.nodes.items(), built.config, NOW)


def gang() -> list[dict[str, Any]]:
    return [claiming(p) for p in members("g", 4, gpus=8)]


def blocker() -> dict[str, Any]:
    """A running pod of no gang whose claim holds dra-0's 8 devices."""
    return claiming(pod("other", 8, gates=(), node_name="dra-0", phase="Running"))


def test_the_nodes_carry_their_slices_devices() -> None:
    built = controller()
    assert {n["metadata"]["name"]: n["status"]["allocatable"].get(f"dra:{CLASS}")
            for n in built.nodes.items()} == {f"dra-{i}": "8" for i in range(4)}


def test_a_dra_gang_waits_while_one_nodes_devices_are_claimed_then_is_released_whole() -> None:
    built = controller()
    waiting = decide(built, [blocker(), *gang()])
    assert waiting.releases == ()
    report = next(r for r in waiting.reports if r.label == "g")
    assert report.state == "waiting" and "32" in report.reason and "24" in report.reason, report
    built.pods.delete(blocker())
    freed = decide(built, [])
    assert {p.name for r in freed.releases for p in r.pods} == {"g-0", "g-1", "g-2", "g-3"}


def test_without_devices_the_controller_saw_members_asking_nothing_and_released_them() -> None:
    # What the controller did before it counted devices: the gang went at once, and
    # the scheduler bound three members and left the fourth pending.
    built = controller(devices=False)
    result = decide(built, [blocker(), *gang()])
    assert {p.name for r in result.releases for p in r.pods} == {"g-0", "g-1", "g-2", "g-3"}


def pins_by_member(result: Plan) -> dict[str, str]:
    return {p.name: r.pins[p.uid] for r in result.releases for p in r.pods if p.uid in r.pins}


def test_a_dra_gang_is_pinned_where_its_devices_are_free_one_member_per_node() -> None:
    # Before: released unpinned ("DRA resourceClaims"), the scheduler placing members
    # one by one. Now each member is pinned, never on dra-0 whose devices are claimed.
    built = controller(nodes=5)
    result = decide(built, [blocker(), *gang()])
    (release,) = result.releases
    assert release.unpinned == ""
    pins = pins_by_member(result)
    assert sorted(pins) == ["g-0", "g-1", "g-2", "g-3"]
    assert sorted(pins.values()) == ["dra-1", "dra-2", "dra-3", "dra-4"]


def test_two_members_of_four_devices_share_a_node_by_its_device_count() -> None:
    built = controller(nodes=2, templates=(template("four-gpus", count=4),))
    pods = [claiming(p, {"resourceClaimTemplateName": "four-gpus"})
            for p in members("g", 4, gpus=8)]
    # 16 devices asked, 8 free (on dra-1): the gang waits, none pinned onto dra-0.
    assert decide(built, [blocker(), *pods]).releases == ()
    built.pods.delete(blocker())
    pins = pins_by_member(decide(built, []))
    assert sorted(pins.values()) == ["dra-0", "dra-0", "dra-1", "dra-1"]


@pytest.mark.parametrize(
    ("claim", "asked", "why"),
    [
        pytest.param({"resourceClaimTemplateName": "admin"},
                     {"count": 8, "adminAccess": True}, "admin access", id="admin-access"),
        pytest.param({"resourceClaimName": "shared"}, None, "shared ResourceClaim shared",
                     id="shared-claim"),
        pytest.param({"resourceClaimTemplateName": "missing"}, None,
                     "ResourceClaimTemplate missing not found", id="unknown-template"),
    ],
)
def test_a_member_whose_devices_a_count_cannot_place_goes_unpinned_with_the_reason(
    claim: dict[str, str], asked: dict[str, Any] | None, why: str
) -> None:
    extra = () if asked is None else (template(claim["resourceClaimTemplateName"], **asked),)
    built = controller(templates=extra)
    pods = [claiming(p, claim) for p in members("g", 4, gpus=8)]
    (release,) = decide(built, pods).releases
    assert release.pins == {}
    assert why in release.unpinned, release.unpinned


def test_a_gang_asking_every_device_of_its_nodes_is_pinned_one_member_per_whole_node() -> None:
    # Before: released unpinned ("allocationMode All"). Each member takes a whole node,
    # never dra-0, whose devices a claim holds (its whole node is not free).
    built = controller(nodes=5, templates=(template("all", allocationMode="All"),))
    pods = [claiming(p, {"resourceClaimTemplateName": "all"}) for p in members("g", 4, gpus=8)]
    result = decide(built, [blocker(), *pods])
    (release,) = result.releases
    assert release.unpinned == ""
    assert sorted(pins_by_member(result).values()) == ["dra-1", "dra-2", "dra-3", "dra-4"]


def test_a_whole_node_member_and_a_member_of_the_same_class_never_share_a_node() -> None:
    # dra-0 offers 8 devices, dra-1 4: an All member asks the fewest (4) and the whole
    # node. A member asking 2 fits beside it by count on dra-0, but the allocator gives
    # the All claim all 8 there: one gang must not be pinned onto one node twice.
    slices = [resource_slice("dra-0"), resource_slice("dra-1", devices=4)]
    built = controller(nodes=2, slices=slices, templates=(
        template("all", allocationMode="All"), template("two", count=2)))
    whole, two = members("g", 2, gpus=8)
    result = decide(built, [claiming(whole, {"resourceClaimTemplateName": "all"}),
                            claiming(two, {"resourceClaimTemplateName": "two"})])
    pins = pins_by_member(result)
    assert len(pins) == 2 and len(set(pins.values())) == 2, pins


H100 = 'device.attributes["gpu.example.com"].productName == "H100"'


def model_slice(name: str, *models: str) -> dict[str, Any]:
    """dra-N's slice of one device per model given, each with its productName."""
    raw = resource_slice(name, devices=len(models))
    for device, model in zip(raw["spec"]["devices"], models, strict=True):
        device["attributes"] = {"productName": {"string": model}}
    return raw


def test_a_request_narrowed_by_its_own_selectors_is_pinned_on_the_nodes_they_accept() -> None:
    # Before: released unpinned ("selectors of its own"). Two H100 nodes, two A100.
    slices = [model_slice(f"dra-{i}", *[m] * 8) for i, m in enumerate(["A100", "H100"] * 2)]
    built = controller(slices=slices, templates=(
        template("h100", count=8, selectors=[{"cel": {"expression": H100}}]),))
    pods = [claiming(p, {"resourceClaimTemplateName": "h100"}) for p in members("g", 2, gpus=8)]
    for raw in pods:  # the view counts the Nodes for the template's selectors first
        built.devices.with_claims(raw, "team", shared=False) if built.devices else None
    result = decide(built, pods)
    (release,) = result.releases
    assert release.unpinned == "", release.unpinned
    assert sorted(pins_by_member(result).values()) == ["dra-1", "dra-3"]


def test_a_node_mixing_devices_a_requests_selectors_accept_and_others_is_not_pinned_on() -> None:
    # Each node: 4 H100 and 4 A100. A member asking the class alone may be given the
    # H100 first; no pin can promise them to the narrowed member.
    slices = [model_slice(f"dra-{i}", *["H100"] * 4, *["A100"] * 4) for i in range(4)]
    built = controller(slices=slices, templates=(
        template("h100", count=4, selectors=[{"cel": {"expression": H100}}]),))
    pods = [claiming(p, {"resourceClaimTemplateName": "h100"}) for p in members("g", 2, gpus=4)]
    for raw in pods:
        built.devices.with_claims(raw, "team", shared=False) if built.devices else None
    (release,) = decide(built, pods).releases
    assert release.pins == {}
    assert "matching the request's selectors and others of their class" in release.unpinned


FIRST_AVAILABLE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": "eight-or-four", "namespace": "team"},
                   "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "firstAvailable": [
                       {"name": "eight", "deviceClassName": CLASS, "count": 8},
                       {"name": "four", "deviceClassName": CLASS, "count": 4}]}]}}}}  # fmt: skip


def test_first_available_members_are_pinned_where_their_largest_alternative_fits() -> None:
    # Before: released unpinned ("firstAvailable alternatives"). Each asks 4 (what
    # could ever run needs) but the allocator takes 8 wherever 8 are free: pinned one
    # per node, never two on one node of 8 (the first would take all 8).
    built = controller(templates=(FIRST_AVAILABLE,))
    pods = [claiming(p, {"resourceClaimTemplateName": "eight-or-four"})
            for p in members("g", 4, gpus=8)]
    result = decide(built, pods)
    (release,) = result.releases
    assert release.unpinned == "", release.unpinned
    assert sorted(pins_by_member(result).values()) == ["dra-0", "dra-1", "dra-2", "dra-3"]


def test_first_available_members_that_fit_only_by_their_smallest_go_unpinned_saying_so() -> None:
    # 8 members of 4 fit the 32 devices, 8 of 8 do not: pinning two per node would
    # let the first on each take all 8; the allocator places them instead.
    built = controller(templates=(FIRST_AVAILABLE,))
    pods = [claiming(p, {"resourceClaimTemplateName": "eight-or-four"})
            for p in members("g", 8, gpus=4)]
    (release,) = decide(built, pods).releases
    assert release.pins == {}
    assert "firstAvailable alternatives may take up to 4 more devices of DeviceClass" in (
        release.unpinned), release.unpinned


def shared_claim(name: str, count: int, node: str = "") -> dict[str, Any]:
    """A ResourceClaim of `count` devices of CLASS; allocated to `node`'s first devices
    (as kube-scheduler's allocator writes it) when `node` is given."""
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team", "uid": f"{name}-uid"},
        "spec": {"devices": {"requests": [
            {"name": "nic", "exactly": {"deviceClassName": CLASS, "count": count}}]}}}
    if node:
        claim["status"] = {"allocation": {
            "devices": {"results": [{"request": "nic", "driver": DRIVER, "pool": node,
                                     "device": f"gpu-{i}"} for i in range(count)]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return claim


def sharing(count: int, claim: str) -> list[dict[str, Any]]:
    """`count` members, each asking 2 devices of its own and naming shared `claim`."""
    pods = []
    for raw in members("g", count, gpus=2):
        claiming(raw, {"resourceClaimTemplateName": "two"})
        raw["spec"]["resourceClaims"].append({"name": "nic", "resourceClaimName": claim})
        pods.append(raw)
    return pods


def with_templates(built: GangController, *templates: dict[str, Any]) -> GangController:
    assert built.devices is not None
    for obj in templates:
        built.devices.templates.upsert(obj)
    return built


def with_claims(built: GangController, *claims: dict[str, Any]) -> GangController:
    assert built.devices is not None
    for obj in claims:
        built.devices.claims.upsert(obj)
    built.devices.claims.relisted({object_key(o) for o in claims})
    return built


def test_members_sharing_a_claim_not_yet_allocated_are_pinned_together_with_its_devices(
) -> None:
    # Before: released unpinned ("shared ResourceClaim"). The claim is allocated with
    # the first member bound, on its node, and the others must follow it there: all
    # three are pinned to one node where their 6 devices and the claim's 2 are free.
    built = with_claims(controller(templates=(template("two", count=2),)),
                        shared_claim("rack-nic", 2))
    result = decide(built, [blocker(), *sharing(3, "rack-nic")])
    (release,) = result.releases
    assert release.unpinned == "", release.unpinned
    pins = pins_by_member(result)
    assert len(pins) == 3 and len(set(pins.values())) == 1 and "dra-0" not in pins.values()


def test_members_sharing_an_allocated_claim_are_pinned_to_its_node() -> None:
    # The claim holds 2 of dra-2's devices: the members may run on dra-2 only, where
    # 6 are left for their own 3 x 2.
    built = with_claims(controller(templates=(template("two", count=2),)),
                        shared_claim("rack-nic", 2, node="dra-2"))
    result = decide(built, sharing(3, "rack-nic"))
    (release,) = result.releases
    assert release.unpinned == "", release.unpinned
    assert set(pins_by_member(result).values()) == {"dra-2"}


def test_members_sharing_a_claim_that_fit_no_single_node_go_unpinned_saying_so() -> None:
    # 5 x 2 of their own and 2 shared: 12 devices on no node of 8. Member by member
    # they fit (the allocator may yet find devices several nodes reach).
    built = with_claims(controller(templates=(template("two", count=2),)),
                        shared_claim("rack-nic", 2))
    (release,) = decide(built, sharing(5, "rack-nic")).releases
    assert release.pins == {}
    assert "the 5 members sharing ResourceClaim rack-nic and its devices fit on no single " \
        "node now" in release.unpinned, release.unpinned


def test_a_member_asking_only_the_shared_claim_is_pinned_with_those_sharing_it() -> None:
    # Its claim is its only device (the controller charges shared claims to no pod):
    # left out, it could bind first elsewhere and take the claim with it.
    built = with_claims(controller(templates=(template("two", count=2),)),
                        shared_claim("rack-nic", 2))
    pods = sharing(3, "rack-nic")
    helper = pods[2]["spec"]  # g-2 asks nothing of its own: the shared claim only
    helper["resourceClaims"] = [{"name": "nic", "resourceClaimName": "rack-nic"}]
    helper["containers"][0]["resources"] = {"claims": [{"name": "nic"}]}
    result = decide(built, pods)
    (release,) = result.releases
    assert release.unpinned == "", release.unpinned
    pins = pins_by_member(result)
    assert sorted(pins) == ["g-0", "g-1", "g-2"] and len(set(pins.values())) == 1, pins


def test_pods_sharing_a_claim_are_read_again_when_it_is_allocated() -> None:
    # Read while the claim was not allocated; allocated since on dra-2 (by a pod of
    # no gang): the members must follow it there, not be pinned where its devices
    # looked free (review finding 4).
    built = with_claims(controller(templates=(template("two", count=2),)),
                        shared_claim("rack-nic", 2))
    for raw in sharing(3, "rack-nic"):
        built.pods.upsert(raw)
    allocated = shared_claim("rack-nic", 2, node="dra-2")
    allocated["metadata"]["resourceVersion"] = "2"
    assert built.devices is not None
    built.devices.claims.upsert(allocated)
    result = plan(built.pods.items(), built.nodes.items(), built.config, NOW)
    assert set(pins_by_member(result).values()) == {"dra-2"}, result.releases


def test_a_released_first_available_member_counts_its_largest_until_it_binds() -> None:
    # g-0 ([8 or 4]) was released pinned to dra-0 and is not bound yet: the allocator
    # may give it all 8 there. Gang h's member of 4 must not be pinned beside it
    # (review finding 6: it was counted at 4 from the pass after its release).
    built = controller(nodes=1, templates=(FIRST_AVAILABLE,))
    (released,) = members("g", 1, gpus=8, gates=())
    claiming(released, {"resourceClaimTemplateName": "eight-or-four"})
    released["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": ["dra-0"]}]}]}}}
    (waiting,) = [claiming(p, {"resourceClaimTemplateName": "four-gpus"})
                  for p in members("h", 1, gpus=4)]
    built = with_templates(built, template("four-gpus", count=4))
    result = decide(built, [released, waiting])
    assert result.releases == (), result.releases


def test_a_node_whose_device_count_is_unknown_is_not_pinned_on() -> None:
    # dra-1's devices may be allocated to many claims: their count is unknown, offered
    # as more than any gang needs; a pin there would be a guess.
    slices = [resource_slice("dra-0"), resource_slice("dra-1", allowMultipleAllocations=True)]
    built = controller(nodes=2, slices=slices)
    result = decide(built, [claiming(p) for p in members("g", 2, gpus=8)])
    (release,) = result.releases
    assert release.pins == {}
    assert "dra-1's dra:gpu.example.com devices cannot be counted" in release.unpinned


def test_a_topology_required_dra_gang_is_packed_into_one_domain() -> None:
    # Zone a: dra-0 (taken) and dra-1; zone b: dra-2 and dra-3. 2 x 8 devices fit only b.
    zones = {"dra-0": "a", "dra-1": "a", "dra-2": "b", "dra-3": "b"}
    built = controller(labels={n: {ZONE: z} for n, z in zones.items()},
                       config=load_config({"topology": [ZONE]}))
    pods = [claiming(p) for p in members("g", 2, gpus=8)]
    for raw in pods:
        raw["metadata"]["annotations"][TOPOLOGY_REQUIRED_ANNOTATION] = ZONE
    assert sorted(pins_by_member(decide(built, [blocker(), *pods])).values()) == [
        "dra-2", "dra-3"]
