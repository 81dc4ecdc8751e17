"""What the controller keeps of the pods and nodes it watches, and when it re-plans.

The controller drops, at ingestion, every pod no plan can depend on and every node
that offers no GPU; these tests hold it to "the plan is the same as with everything
kept", and to waking the planner only for changes a plan can see.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders.gangs import T0, members, node, pod
from kubernetes.client import ApiClient

from gangkeeper.policies.cluster.node_facts import node_fields
from gangkeeper.policies.cluster.observed_gangs import PodInfo, is_live, pod_info, same_for_planning
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.controller.controller import GangController
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.informer import Informer, Store
from gangkeeper.webhook.kube.resources import PODS

CFG = Config()


@pytest.fixture(scope="module")
def controller() -> GangController:
    # Built but never started: no thread runs and no request is made.
    return GangController(ApiClient(), CFG, namespace="gangkeeper-system", identity="test")


@pytest.mark.parametrize(
    ("what", "raw", "kept"),
    [
        ("a gated gang member", pod("g-0", gang="g", min_member=2), True),
        ("a gang member asking for no GPU", pod("g-1", 0, gang="g", min_member=2), True),
        ("a bound GPU pod of no gang", pod("solo", 2, node_name="n1", phase="Running"), True),
        ("an unbound GPU pod of no gang (in flight)", pod("pending", 1), True),
        # Its cpu, memory and pod slot count where it runs (placement checks them).
        ("a bound CPU-only pod of no gang", pod("web", 0, node_name="n1", phase="Running"), True),
        ("an unbound CPU-only pod of no gang", pod("cron", 0), False),
        ("a finished GPU pod", pod("done", 1, node_name="n1", phase="Succeeded"), False),
    ],
)
def test_the_controller_keeps_only_gang_members_gpu_pods_and_bound_pods(
    controller: GangController, what: str, raw: dict[str, Any], kept: bool
) -> None:
    assert (controller._pod(raw) is not None) is kept, what


def cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [node("n1", 8), node("n2", 8), node("cpu-only", 0), node("t4", 4, resource="x/y")]
    pods = [
        *members("a", 4, gpus=2),
        *members("b", 3, created=T0 + 10, gpus=4),
        *members("c", 2, min_member=3, created=T0 + 20),
        pod("solo", 4, node_name="n1", phase="Running"),
        pod("inflight", 2, created=T0 - 5),
        pod("web", 0, node_name="n2", phase="Running"),
        pod("cron", 0),
    ]
    return nodes, pods


def test_planning_from_what_is_kept_decides_exactly_as_from_everything(
    controller: GangController,
) -> None:
    nodes, pods = cluster()
    everything = plan([pod_info(p, CFG) for p in pods if is_live(p)], nodes, CFG, T0 + 60)
    kept_pods = [i for p in pods if (i := controller._pod(p)) is not None]
    kept_nodes = [n for raw in nodes if (n := controller._node(raw)) is not None]
    slim = plan(kept_pods, kept_nodes, CFG, T0 + 60)
    assert len(kept_pods) < len(pods) and len(kept_nodes) == len(nodes)
    assert slim.reports == everything.reports
    assert [(r.gang.key, [p.name for p in r.pods]) for r in slim.releases] == [
        (r.gang.key, [p.name for p in r.pods]) for r in everything.releases
    ]


def test_a_node_keeps_only_the_fields_planning_reads() -> None:
    raw = node("n1", 8, labels={"zone": "a"}, taints=[{"key": "k", "effect": "NoSchedule"}],
               unschedulable=True)
    raw["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    raw["status"]["images"] = [{"names": ["big"], "sizeBytes": 1}]
    slim = node_fields(raw)
    assert slim is not None
    assert slim["metadata"] == {"name": "n1", "labels": raw["metadata"]["labels"]}
    assert slim["spec"] == {"taints": raw["spec"]["taints"], "unschedulable": True}
    assert slim["status"] == {"allocatable": raw["status"]["allocatable"]}
    # A node without GPUs is kept: a gang whose members ask no GPUs may be placed there.
    assert node_fields(node("cpu", 0, resource="cpu")) is not None
    assert node_fields({"metadata": {"name": "bare"}, "status": {}}) is None


def info(**changes: Any) -> PodInfo:
    raw = pod("w", 1, gang="g", min_member=2)
    raw["metadata"].update(changes.pop("metadata", {}))
    raw["spec"].update(changes.pop("spec", {}))
    return pod_info(raw, CFG)


@pytest.mark.parametrize(
    ("what", "new", "same"),
    [
        ("only the resourceVersion moved", info(metadata={"resourceVersion": "9"}), True),
        ("the gate was lifted", info(spec={"schedulingGates": []}), False),
        ("the pod was bound", info(spec={"nodeName": "n1"}), False),
        ("the pod is being deleted", info(metadata={"deletionTimestamp": "2027-01-01T00:00:00Z"}),
         False),
    ],
)
def test_updates_that_change_only_the_version_need_no_new_plan(
    what: str, new: PodInfo, same: bool
) -> None:
    assert same_for_planning(info(), new) is same, what


def test_the_planner_is_woken_only_by_events_that_change_what_is_kept(
    controller: GangController,
) -> None:
    member = pod("g-0", gang="g", min_member=2)
    web = pod("web", 0)
    status_only = {**member, "metadata": {**member["metadata"], "resourceVersion": "2"},
                   "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled"}]}}
    bound = {**status_only, "metadata": {**member["metadata"], "resourceVersion": "3"},
             "spec": {**member["spec"], "nodeName": "n1"}}
    events = [
        {"type": "ADDED", "object": web},            # dropped: nothing to plan
        {"type": "MODIFIED", "object": web},         # still dropped
        {"type": "MODIFIED", "object": status_only},  # kept, same for planning
        {"type": "DELETED", "object": web},          # was never kept
        {"type": "MODIFIED", "object": bound},       # a real change
    ]
    api = FakeApi()
    api.seed(PODS.path, member)
    wakes: list[int] = []
    store: Store[PodInfo] = Store(controller._pod, lambda: wakes.append(1), same_for_planning)
    informer = Informer(api, PODS)
    informer.subscribe(store)
    informer.list_once()
    assert len(wakes) == 1  # the list itself
    for event in events:
        api.emit(PODS.path, event["type"], event["object"])
    api.end_watch(PODS.path)
    informer.watch_once()
    assert len(wakes) == 2  # only the bind
    [stored] = store.items()
    assert stored.node_name == "n1" and stored.resource_version == str(api.rv)
