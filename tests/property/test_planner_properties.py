"""The controller's `Planner` against `plan()` from scratch, after every event.

Random sequences of Node events (added, deleted, cordoned, relabelled, resized; each
a new dict, as the informer's store gives them) and pod events (a gang's members
created, bound or deleted) on a small fleet: after each, the planner — which keeps
Node facts from the passes before — decides exactly what a from-scratch plan of the
same state decides.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.planning import decisions
from gangkeeper.policies import Config
from gangkeeper.policies.cluster.observed_gangs import parse_time, pod_info
from gangkeeper.policies.names import (
    GANG_LABEL,
    GANG_NAME_ANNOTATION,
    GATE,
    MIN_MEMBER_ANNOTATION,
    PIN_LABEL,
    RELEASED_AT_ANNOTATION,
)
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.planner import Planner
from gangkeeper.webhook.sandbox.nodes import gpu_node

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)
GPU = "nvidia.com/gpu"
EPOCH = 1_800_000_000.0


def stamp(at: float) -> str:
    """RFC 3339, as the API server writes times (whole seconds)."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def member(
    gang: int, index: int, size: int, gpus: int, node: str = "", *,
    released_at: float = 0.0, pin: str = "", ready: bool = False, created: float = EPOCH,
) -> dict[str, Any]:
    name = f"g{gang}"
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus), "cpu": "1"},
                                                   "limits": {GPU: str(gpus)}}}],
    }
    if node:
        spec["nodeName"] = node
    elif not released_at:
        spec["schedulingGates"] = [{"name": GATE}]
    if pin:
        # Half the gangs pinned as earlier versions did (the node's hostname label):
        # pods of both kinds live side by side through an upgrade.
        spec["nodeSelector"] = {PIN_LABEL: pin} if gang % 2 else {}
        if not gang % 2:
            spec["affinity"] = {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In",
                                      "values": [pin]}]}]}}}
    annotations = {GANG_NAME_ANNOTATION: name, MIN_MEMBER_ANNOTATION: str(size)}
    if released_at:
        annotations[RELEASED_AT_ANNOTATION] = stamp(released_at)
    status = {"conditions": [{"type": "Ready", "status": "True"}]} if ready else {}
    return {"metadata": {
        "name": f"{name}-{index}", "namespace": "ns", "uid": f"{name}-{index}",
        "resourceVersion": "1", "creationTimestamp": stamp(created),
        "labels": {GANG_LABEL: name}, "annotations": annotations,
    }, "spec": spec, "status": status}


events = st.lists(
    st.tuples(
        st.sampled_from(["add", "delete", "cordon", "relabel", "resize", "strip", "gang",
                         "bind", "drop", "release", "ready"]),
        st.integers(0, 7), st.integers(1, 4), st.sampled_from([1, 2, 4, 8]),
    ),
    min_size=1, max_size=12,
)


class Cluster:
    """Nodes and pods as the informers' stores hold them, changed by one event at a time."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {
            f"n{i}": gpu_node(f"n{i}", 8, labels={"pool": "a"}) for i in range(3)
        }
        self.pods: dict[str, dict[str, Any]] = {}

    def apply(self, event: str, which: int, size: int, gpus: int, at: float) -> None:
        nodes, name = self.nodes, f"n{which}"
        mine = [u for u in self.pods if u.startswith(f"g{which}-")]
        born = {u: parse_time(p["metadata"]["creationTimestamp"]) for u, p in self.pods.items()}
        if event == "add":
            nodes[name] = gpu_node(name, gpus, labels={"pool": "a"})
        elif event == "delete":
            nodes.pop(name, None)
        elif name in nodes and event in ("cordon", "relabel", "resize", "strip"):
            old = nodes[name]
            if event == "cordon":
                nodes[name] = {**old, "spec": {"unschedulable": True}}
            elif event == "relabel":
                labels = {**old["metadata"]["labels"], "pool": "b"}
                nodes[name] = {**old, "metadata": {**old["metadata"], "labels": labels}}
            else:
                # "strip": its GPUs gone (a node without GPUs is kept apart).
                nodes[name] = gpu_node(
                    name, gpus if event == "resize" else 0, labels=old["metadata"]["labels"]
                )
        elif event == "gang":
            for index in range(size):
                pod = member(which, index, size, gpus, created=at)
                self.pods[pod["metadata"]["uid"]] = pod
        elif event in ("bind", "ready", "release") and nodes:
            # Bound (Ready or not), or released pinned and not bound (yet, or ever).
            host = sorted(nodes)[which % len(nodes)]
            for uid in mine:
                index = int(uid.split("-")[1])
                if event == "release":
                    self.pods[uid] = member(which, index, size, gpus, released_at=at, pin=host,
                                            created=born[uid])
                else:
                    self.pods[uid] = member(which, index, size, gpus, node=host,
                                            released_at=at, ready=event == "ready",
                                            created=born[uid])
        elif event == "drop":
            self.pods = {u: p for u, p in self.pods.items() if u not in mine}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events)
def test_after_every_event_the_planner_decides_what_a_fresh_plan_decides(
    sequence: list[tuple[str, int, int, int]],
) -> None:
    config = Config()
    planner = Planner(config)
    cluster = Cluster()
    for step, (event, which, size, gpus) in enumerate(sequence):
        at = EPOCH + step
        cluster.apply(event, which, size, gpus, at)
        infos = [pod_info(p, config) for p in cluster.pods.values()]
        nodes = list(cluster.nodes.values())
        ours = planner.plan(infos, nodes, at)
        assert decisions(ours) == decisions(plan(infos, nodes, config, at))


#: Seconds between passes: below, at and past the deadlines of `SHORT` (ages 0.5 apart
#: cross the whole seconds the reasons count).
gaps = st.lists(st.sampled_from([0.0, 0.5, 1.0, 9.0, 19.5, 20.0, 30.0, 41.0, 120.0]),
                min_size=1, max_size=5)
SHORT = replace(Config(), gang_timeout_seconds=30, rebind_seconds=20,
                pods_ready_timeout_seconds=40, pods_ready_requeue=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events, gaps)
def test_a_pass_with_nothing_changed_decides_what_a_fresh_plan_decides_at_any_later_time(
    sequence: list[tuple[str, int, int, int]], waits: list[float],
) -> None:
    planner = Planner(SHORT)
    cluster = Cluster()
    at = EPOCH
    for version, (event, which, size, gpus) in enumerate(sequence):
        cluster.apply(event, which, size, gpus, at)
        infos = [pod_info(p, SHORT) for p in cluster.pods.values()]
        nodes = list(cluster.nodes.values())
        for wait in waits:
            at += wait
            ours = planner.plan(infos, nodes, at, version=version)
            assert decisions(ours) == decisions(plan(infos, nodes, SHORT, at)), (at - EPOCH)
