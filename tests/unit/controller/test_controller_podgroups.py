"""The group objects each scheduler backend needs, owner-referenced for garbage collection."""

from __future__ import annotations

import pytest
from builders.gangs import members, pod

from gangkeeper.policies.cluster.observed_gangs import observe_gangs, pod_info
from gangkeeper.policies.release.groups import (
    COSCHEDULING,
    VOLCANO,
    group_object,
    native_resource,
)
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller.writes import ungate_patch

OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid"}


def gang(pods: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    cfg = Config()
    return observe_gangs([pod_info(p, cfg) for p in pods], cfg)[0]


@pytest.mark.parametrize(
    ("resource", "api_version"),
    [(COSCHEDULING, "scheduling.x-k8s.io/v1alpha1"), (VOLCANO, "scheduling.volcano.sh/v1beta1")],
)
def test_scheduler_plugin_podgroups_carry_min_member_and_gpu_min_resources(
    resource: object, api_version: str
) -> None:
    obj = group_object(gang(members("train", 4, min_member=3, gpus=2, owner=OWNER)), resource)  # type: ignore[arg-type]
    assert obj["apiVersion"] == api_version
    assert obj["kind"] == "PodGroup"
    assert obj["metadata"]["name"] == "train"
    assert obj["metadata"]["namespace"] == "team"
    assert obj["spec"] == {"minMember": 3, "minResources": {"nvidia.com/gpu": "6"}}


def test_the_native_group_is_a_scheduling_k8s_io_podgroup_with_a_gang_policy() -> None:
    obj = group_object(gang(members("train", 8, owner=OWNER)), native_resource("v1beta1"))
    assert obj["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert obj["spec"] == {"schedulingPolicy": {"gang": {"minCount": 8}}}


def test_the_group_is_owned_by_the_gangs_top_level_owner() -> None:
    obj = group_object(gang(members("train", 2, owner=OWNER)), COSCHEDULING)
    [ref] = obj["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"], ref["name"], ref["uid"]) == (
        "batch/v1", "Job", "train", "job-uid"
    )


def test_without_a_readable_owner_the_group_has_no_owner_reference() -> None:
    pods = members("train", 2)
    pods[0]["metadata"]["annotations"]["gangkeeper.io/owner"] = "{not json"  # type: ignore[index]
    obj = group_object(gang(pods), VOLCANO)
    assert "ownerReferences" not in obj["metadata"]


def test_the_group_name_is_the_one_the_pods_point_at() -> None:
    pods = members("train", 2, extra_labels={"scheduling.x-k8s.io/pod-group": "train-pg"})
    assert group_object(gang(pods), COSCHEDULING)["metadata"]["name"] == "train-pg"
    native = members("n", 2)
    for p in native:
        p["spec"]["schedulingGroup"] = {"podGroupName": "n-group"}  # type: ignore[index]
    assert group_object(gang(native), native_resource("v1alpha3"))["metadata"]["name"] == "n-group"


@pytest.mark.parametrize(
    ("gates", "remaining"),
    [
        (("gangkeeper.io/gang",), []),
        (("other.io/a", "gangkeeper.io/gang", "other.io/b"), ["other.io/a", "other.io/b"]),
    ],
)
def test_ungating_removes_only_gangkeepers_gate_and_tests_what_it_read(
    gates: tuple[str, ...], remaining: list[str]
) -> None:
    info = pod_info(pod("w", gang="g", min_member=1, gates=gates), Config())
    test_op, replace_op = ungate_patch(info)
    assert test_op == {
        "op": "test", "path": "/spec/schedulingGates", "value": [{"name": g} for g in gates]
    }
    assert replace_op["value"] == [{"name": g} for g in remaining]


def test_a_podgroup_does_not_wait_for_members_that_arrive_after_release() -> None:
    """A scheduler told minMember 8 for 2 leaders whose 6 followers exist only once the
    leaders run would wait for ever: the group's minimum is the members that can exist."""
    pods = members("js", 2, min_member=8, gpus=8, owner=OWNER)
    for p in pods:
        p["metadata"]["annotations"]["gangkeeper.io/later-members"] = (
            '[{"count":6,"demand":{"nvidia.com/gpu":8}}]'
        )
    obj = group_object(gang(pods), COSCHEDULING)
    assert obj["spec"]["minMember"] == 2
    assert obj["spec"]["minResources"] == {"nvidia.com/gpu": "16"}


def _prioritised(pods: list[dict[str, object]], name: str, value: int) -> list[dict[str, object]]:
    """As the API server stores them: the Priority admission plugin resolved the class."""
    for p in pods:
        p["spec"]["priorityClassName"] = name  # type: ignore[index]
        p["spec"]["priority"] = value  # type: ignore[index]
    return pods


def test_the_native_group_names_its_members_priority_class() -> None:
    """kube-scheduler refuses a native group whose priority is not its pods' (found on
    the sandbox: every prioritised gang of the native backend stayed Pending with
    'all pods in a single pod group should have the same priority'); the API server
    sets a PodGroup's priority from its class alone."""
    pods = _prioritised(members("train", 2, owner=OWNER), "team-high", 1000)
    native = group_object(gang(pods), native_resource("v1beta1"))
    assert native["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "team-high",
    }
    # The scheduler-plugins PodGroup has no such field: its pods carry the priority.
    assert "priorityClassName" not in group_object(gang(pods), COSCHEDULING)["spec"]


@pytest.mark.parametrize("resource", [COSCHEDULING, VOLCANO])
def test_a_dra_gangs_podgroup_leaves_its_devices_out_of_min_resources(resource: object) -> None:
    """Coscheduling's PreFilter (CheckClusterResource, pkg/coscheduling/core/core.go)
    sums minResources over the Nodes' allocatable, which never lists gangkeeper's
    `dra:<class>`: with it the group would wait for ever. Members as the controller
    sees them (kube/device_view.py): claims as `dra:` limits, beside a plain GPU."""
    from gangkeeper.webhook.kube.device_view import with_device_names

    cfg = with_device_names(Config())
    pods = members("train", 4, gpus=8, owner=OWNER, resource="dra:gpu.example.com")
    pods[0]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"  # type: ignore[index]
    observed = observe_gangs([pod_info(p, cfg) for p in pods], cfg)[0]
    assert dict(observed.members[1].demand) == {"dra:gpu.example.com": 8}
    obj = group_object(observed, resource)  # type: ignore[arg-type]
    assert obj["spec"] == {"minMember": 4, "minResources": {"nvidia.com/gpu": "1"}}


class _Recorded:
    """A rest client that keeps what it is asked to create (GroupWriter's one call)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, object]] = []

    def request(self, method: str, path: str, query: object, body: dict[str, object]) -> None:
        self.bodies.append(body)


@pytest.mark.parametrize("backend", ["coscheduling", "volcano"])
def test_gpus_a_device_class_serves_by_extended_resource_name_stay_out_of_min_resources(
    backend: str,
) -> None:
    """KEP-5004: a DeviceClass with `extendedResourceName: nvidia.com/gpu` serves plain
    `nvidia.com/gpu` requests from its devices on Nodes whose allocatable lists none.
    Coscheduling's PreFilter (CheckClusterResource) sums the Nodes' allocatable, which
    on such Nodes holds no `nvidia.com/gpu`: in minResources the group would wait for
    ever. The controller knows the classes (GangController(devices=True)), so the
    PodGroup it creates leaves that resource out, and keeps the others."""
    from kubernetes.client import ApiClient

    from gangkeeper.webhook.controller import GangController

    built = GangController(ApiClient(), Config(), namespace="gangkeeper-system",
                           identity="test", devices=True)
    assert built.devices is not None
    served = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
              "metadata": {"name": "gpu.example.com"},
              "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
                       "extendedResourceName": "nvidia.com/gpu"}}  # fmt: skip
    recorded = _Recorded()
    built.groups.rest = recorded  # type: ignore[assignment]
    pods = members("train", 4, gpus=8, owner=OWNER, backend=backend)
    pods[0]["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] = "1"  # type: ignore[index]
    cfg = Config()
    observed = observe_gangs([pod_info(p, cfg) for p in pods], cfg)[0]

    assert built.groups.ensure(observed)  # no class yet: the GPUs are the Nodes' own
    assert recorded.bodies[-1]["spec"]["minResources"] == {  # type: ignore[index]
        "amd.com/gpu": "1", "nvidia.com/gpu": "32"}

    built.devices.classes.upsert(served)
    assert built.groups.ensure(observed)
    assert recorded.bodies[-1]["spec"] == {"minMember": 4, "minResources": {"amd.com/gpu": "1"}}
