"""The controller's `Planner` against `plan()` from scratch, after every event.

Random sequences of Node events (added, deleted, cordoned, relabelled, resized; each
a new dict, as the informer's store gives them) and pod events (a gang's members
created, bound or deleted) on a small fleet: after each, the planner — which keeps
Node facts from the passes before — decides exactly what a from-scratch plan of the
same state decides.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.planning import decisions
from gangkeeper.policies import Config
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.names import GANG_LABEL, GANG_NAME_ANNOTATION, GATE, MIN_MEMBER_ANNOTATION
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.planner import Planner
from gangkeeper.webhook.sandbox.nodes import gpu_node

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)
GPU = "nvidia.com/gpu"
EPOCH = 1_800_000_000.0


def member(gang: int, index: int, size: int, gpus: int, node: str = "") -> dict[str, Any]:
    name = f"g{gang}"
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus), "cpu": "1"},
                                                   "limits": {GPU: str(gpus)}}}],
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": GATE}]
    return {"metadata": {
        "name": f"{name}-{index}", "namespace": "ns", "uid": f"{name}-{index}",
        "resourceVersion": "1", "creationTimestamp": "2027-01-15T08:00:00Z",
        "labels": {GANG_LABEL: name},
        "annotations": {GANG_NAME_ANNOTATION: name, MIN_MEMBER_ANNOTATION: str(size)},
    }, "spec": spec}


events = st.lists(
    st.tuples(
        st.sampled_from(["add", "delete", "cordon", "relabel", "resize", "gang", "bind",
                         "drop"]),
        st.integers(0, 7), st.integers(1, 4), st.sampled_from([1, 2, 4, 8]),
    ),
    min_size=1, max_size=12,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events)
def test_after_every_event_the_planner_decides_what_a_fresh_plan_decides(
    sequence: list[tuple[str, int, int, int]],
) -> None:
    config = Config()
    planner = Planner(config)
    nodes: dict[str, dict[str, Any]] = {
        f"n{i}": gpu_node(f"n{i}", 8, labels={"pool": "a"}) for i in range(3)
    }
    pods: dict[str, dict[str, Any]] = {}
    for step, (event, which, size, gpus) in enumerate(sequence):
        name = f"n{which}"
        if event == "add":
            nodes[name] = gpu_node(name, gpus, labels={"pool": "a"})
        elif event == "delete":
            nodes.pop(name, None)
        elif name in nodes and event in ("cordon", "relabel", "resize"):
            old = nodes[name]
            if event == "cordon":
                nodes[name] = {**old, "spec": {"unschedulable": True}}
            elif event == "relabel":
                labels = {**old["metadata"]["labels"], "pool": "b"}
                nodes[name] = {**old, "metadata": {**old["metadata"], "labels": labels}}
            else:
                nodes[name] = gpu_node(name, gpus, labels=old["metadata"]["labels"])
        elif event == "gang":
            for index in range(size):
                pod = member(which, index, size, gpus)
                pods[pod["metadata"]["uid"]] = pod
        elif event == "bind":
            for uid in list(pods):
                if uid.startswith(f"g{which}-") and nodes:
                    pods[uid] = member(which, int(uid.split("-")[1]), size, gpus,
                                       node=sorted(nodes)[which % len(nodes)])
        elif event == "drop":
            pods = {u: p for u, p in pods.items() if not u.startswith(f"g{which}-")}
        infos = [pod_info(p, config) for p in pods.values()]
        at = EPOCH + step
        ours = planner.plan(infos, list(nodes.values()), at)
        assert decisions(ours) == decisions(plan(infos, list(nodes.values()), config, at))
