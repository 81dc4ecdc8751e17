"""The controller's `Planner` against `plan()` from scratch, after every event.

The planner keeps, from one pass to the next, each Node's facts and capacities, the
fleet a pass starts from (bound pods, and pods in flight placed node by node), each
gang's observation, and each gang's decision with what it did to the pass (re-used
while what the gang saw is unchanged). Every one of those must be dropped or moved
exactly when its inputs change, so these tests drive random sequences of the events
they depend on, on a small fleet, and after each compare the planner's decisions
with a from-scratch plan of the same state:

- Nodes added, deleted, cordoned, relabelled, resized, stripped of their GPUs, or
  given another node's hostname (a pin that names two nodes); each a new dict, as
  the informer's store gives them.
- Gangs created gated (three priorities; some with members that arrive only after
  release), released pinned or unpinned and not bound, partly released, bound,
  Ready, touched (a status-only update: a new object, nothing else changed), marked
  for deletion, deleted.
- Pods of no gang bound with GPUs (lower-priority work to preempt) or pending
  unpinned (in flight, placed first-fit over several nodes); a pod of another
  namespace with a member's name and creation second, in flight on its node (a tie
  in first-fit order); a placeholder pod; a pod preempted by an earlier pass
  (`leaving`).
- Time moving on between passes by up to two minutes, across the deadlines of
  `SHORT` (a gang turning stuck, `rebindSeconds`, `podsReadyTimeoutSeconds`).

As the controller's pod store does, a pod unchanged since the last pass is the same
`PodInfo` object, and a changed one a new object.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.planning import decisions
from gangkeeper.policies import Config
from gangkeeper.policies.cluster.observed_gangs import PodInfo, parse_time, pod_info
from gangkeeper.policies.model import HELD_BY_CLAIMS
from gangkeeper.policies.names import (
    GANG_LABEL,
    GANG_NAME_ANNOTATION,
    GATE,
    LATER_ANNOTATION,
    MIN_MEMBER_ANNOTATION,
    OWNER_ANNOTATION,
    PIN_LABEL,
    PLACEHOLDER_LABEL,
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
SHORT = replace(Config(), gang_timeout_seconds=30, rebind_seconds=20,
                pods_ready_timeout_seconds=40, pods_ready_requeue=True)
NODE_EVENTS = ("add", "delete", "cordon", "relabel", "resize", "strip", "twin", "hold",
               "beat")
POD_EVENTS = ("gang", "gang", "gang", "bind", "bind", "ready", "release", "release", "loose",
              "half", "touch", "drop", "deleting", "stray", "pending", "tie", "placeholder",
              "leave", "replace", "shuffle", "arrive")
#: Seconds between passes: below, at and past the deadlines of `SHORT` (ages 0.5 apart
#: cross the whole seconds the reasons count).
GAPS = (0.0, 0.0, 0.5, 1.0, 9.0, 19.5, 20.0, 30.0, 41.0, 120.0)


def stamp(at: float) -> str:
    """RFC 3339, as the API server writes times (whole seconds)."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def member(
    gang: int, index: int, size: int, gpus: int, node: str = "", *,
    released_at: float = 0.0, pin: str = "", ready: bool = False, created: float = EPOCH,
    gated: bool = True, later: bool = False, uid: str = "", pool: str = "",
) -> dict[str, Any]:
    """Member `index` of gang g`gang` (priority 0, 100 or 200 by the gang's number;
    gangs 1 and 4 have members that arrive only after release, 2 and 1 (`later`: in
    minMember, not in `size`); gangs 4 and 9 may use nodes of pool b only)."""
    name = f"g{gang}"
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "priority": (gang % 3) * 100,
        "containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus), "cpu": "1"},
                                                   "limits": {GPU: str(gpus)}}}],
    }
    if node:
        spec["nodeName"] = node
    elif gated and not released_at:
        spec["schedulingGates"] = [{"name": GATE}]
    later_count = (2 if gang == 1 else 1) if later else 0
    # Gangs 4 and 9 may use relabelled nodes only; `pool`: these nodes only.
    selector = {"pool": pool or "b"} if gang % 5 == 4 or pool else {}
    if pin:
        # Half the gangs pinned as earlier versions did (the node's hostname label):
        # pods of both kinds live side by side through an upgrade.
        if gang % 2:
            selector[PIN_LABEL] = pin
        else:
            spec["affinity"] = {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In",
                                      "values": [pin]}]}]}}}
    if selector:
        spec["nodeSelector"] = selector
    annotations = {GANG_NAME_ANNOTATION: name, MIN_MEMBER_ANNOTATION: str(size + later_count),
                   OWNER_ANNOTATION: json.dumps({"apiVersion": "batch/v1", "kind": "Job",
                                                 "name": name, "uid": f"job-{gang}"})}
    if later:
        annotations[LATER_ANNOTATION] = json.dumps(
            [{"count": 2 if gang == 1 else 1, "demand": {GPU: gpus}}])
    if released_at:
        annotations[RELEASED_AT_ANNOTATION] = stamp(released_at)
    status = {"conditions": [{"type": "Ready", "status": "True"}]} if ready else {}
    return {"metadata": {
        "name": f"{name}-{index}", "namespace": "ns", "uid": uid or f"{name}-{index}",
        "creationTimestamp": stamp(created),
        "labels": {GANG_LABEL: name}, "annotations": annotations,
    }, "spec": spec, "status": status}


def plain_pod(uid: str, gpus: int, created: float, *, node: str = "", pin: str = "",
              namespace: str = "other", name: str = "", labels: dict[str, str] | None = None,
              ) -> dict[str, Any]:
    """A pod of no gang (priority 0) with GPUs: bound, or pending (pinned or not)."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {
        "requests": {GPU: str(gpus), "cpu": "1"}, "limits": {GPU: str(gpus)}}}]}
    if node:
        spec["nodeName"] = node
    if pin:
        spec["nodeSelector"] = {PIN_LABEL: pin}
    return {"metadata": {"name": name or uid, "namespace": namespace, "uid": uid,
                         "creationTimestamp": stamp(created), "labels": labels or {}},
            "spec": spec, "status": {}}


events = st.lists(
    st.tuples(
        st.sampled_from(NODE_EVENTS + POD_EVENTS), st.integers(0, 4), st.integers(1, 4),
        st.sampled_from([1, 2, 4, 8]), st.sampled_from(GAPS),
    ),
    min_size=1, max_size=20,
)


class Cluster:
    """Nodes and pods as the informers' stores hold them, changed by one event at a
    time: a changed object is a new dict at a new resourceVersion, and its `PodInfo` a
    new object; an unchanged pod keeps its `PodInfo` (the controller's `Store`)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.nodes: dict[str, dict[str, Any]] = {
            f"n{i}": gpu_node(f"n{i}", 8, labels={"pool": "a"}) for i in range(3)
        }
        self.pods: dict[str, dict[str, Any]] = {}
        self._infos: dict[str, PodInfo] = {}
        self.leaving: frozenset[str] = frozenset()
        self._version = 0

    def infos(self) -> list[PodInfo]:
        return [self._infos[uid] for uid in self.pods]

    def put(self, pod: dict[str, Any]) -> None:
        self._version += 1
        pod["metadata"]["resourceVersion"] = str(self._version)
        uid = pod["metadata"]["uid"]
        self.pods[uid] = pod
        self._infos[uid] = pod_info(pod, self.config)

    def remove(self, uid: str) -> None:
        self.pods.pop(uid, None)
        self._infos.pop(uid, None)

    def apply(self, event: str, which: int, size: int, gpus: int, at: float) -> None:
        if event in NODE_EVENTS:
            self._node_event(event, f"n{which}", gpus)
        elif event in ("gang", "bind", "ready", "release", "loose", "half", "replace",
                       "arrive"):
            self._gang_event(event, which, size, gpus, at)
        else:
            self._pod_event(event, which, gpus, at)

    def _host(self, which: int) -> str:
        hosts = sorted(self.nodes)
        return hosts[which % len(hosts)] if hosts else ""

    def _mine(self, which: int) -> list[str]:
        return sorted(u for u in self.pods if u.startswith(f"g{which}-"))

    def _born(self, uid: str) -> float:
        return parse_time(self.pods[uid]["metadata"]["creationTimestamp"])

    def _node_event(self, event: str, name: str, gpus: int) -> None:
        nodes = self.nodes
        if event == "add":
            nodes[name] = gpu_node(name, gpus, labels={"pool": "a"})
        elif event == "delete":
            nodes.pop(name, None)
        elif name not in nodes:
            return
        elif event == "cordon":
            nodes[name] = {**nodes[name], "spec": {"unschedulable": True}}
        elif event == "beat":
            # A status update that changes nothing placement reads (a new object).
            old = nodes[name]
            nodes[name] = {**old, "status": {**old["status"], "images": [{"sizeBytes": gpus}]}}
        elif event == "hold":
            # Claims allocated with no pod hold some of its devices (`NodeFacts.held`).
            old = nodes[name]
            held = min(gpus, 8)
            nodes[name] = {**old, "status": {**old["status"], HELD_BY_CLAIMS: {GPU: held}}}
        elif event in ("relabel", "twin"):
            old = nodes[name]
            labels = {**old["metadata"]["labels"], "pool": "b"}
            if event == "twin":
                labels[PIN_LABEL] = "n0"  # a hostname that names two nodes
            nodes[name] = {**old, "metadata": {**old["metadata"], "labels": labels}}
        else:
            # "strip": its GPUs gone (a node without GPUs is kept apart).
            nodes[name] = gpu_node(
                name, gpus if event == "resize" else 0, labels=nodes[name]["metadata"]["labels"]
            )

    def _gang_event(self, event: str, which: int, size: int, gpus: int, at: float) -> None:
        """A gang's members created, released, bound, replaced; `coming`: its members
        that arrive only after release."""
        mine, host, later = self._mine(which), self._host(which), which % 3 == 1
        coming = (2 if which == 1 else 1) if later else 0
        if event == "gang":
            for index in range(size):
                self.put(member(which, index, size, gpus, created=at, later=later))
            return
        if not mine:
            return
        first = self.pods[mine[0]]
        count = int(first["metadata"]["annotations"][MIN_MEMBER_ANNOTATION]) - coming
        if event == "replace":
            # A released member deleted and recreated by its owner: gated, a new uid.
            if not first["spec"].get("schedulingGates"):
                self.remove(mine[0])
                self.put(member(which, 0, count, gpus, created=at, later=later,
                                uid=f"g{which}-0-r{int(at)}"))
        elif event == "arrive" and later:
            # A member that arrives only after release comes (its owner made it now),
            # gated: the gang is released, so rule 2 releases it at once.
            self.put(member(which, len(mine), count, gpus, created=at, later=later))
        elif host:
            for position, uid in enumerate(mine):
                if event == "half" and position > 0:
                    break  # the others stay gated: a release interrupted
                index, pod = int(uid.split("-")[1]), self.pods[uid]
                gpu = int(pod["spec"]["containers"][0]["resources"]["requests"][GPU])
                created = self._born(uid)
                if event in ("release", "half"):
                    self.put(member(which, index, count, gpu, released_at=at, pin=host,
                                    created=created, later=later, uid=uid))
                elif event == "loose":
                    self.put(member(which, index, count, gpu, gated=False, created=created,
                                    later=later, uid=uid))
                else:
                    self.put(member(which, index, count, gpu, node=host, released_at=at,
                                    ready=event == "ready", created=created, later=later,
                                    uid=uid))

    def _pod_event(self, event: str, which: int, gpus: int, at: float) -> None:
        mine, host = self._mine(which), self._host(which)
        if event == "touch":
            for uid in mine:  # a status-only update: the same pod, a new object
                self.put({**self.pods[uid], "status": {**self.pods[uid]["status"]}})
        elif event == "deleting":
            for uid in mine[:1]:
                pod = self.pods[uid]
                self.put({**pod, "metadata": {**pod["metadata"],
                                              "deletionTimestamp": stamp(at)}})
        elif event == "drop":
            for uid in mine:
                self.remove(uid)
        elif event == "stray" and host:
            self.put(plain_pod(f"stray-{which}", gpus, at, node=host))
        elif event == "pending":
            self.put(plain_pod(f"pending-{which}", gpus, at))
        elif event == "tie" and mine and host:
            # Another namespace's pod with a member's name and creation second, in
            # flight on the member's node: first-fit orders the two by list order.
            self._gang_event("release", which, 1, gpus, at)
            name = self.pods[mine[0]]["metadata"]["name"]
            self.put(plain_pod(f"tie-{which}", gpus, self._born(mine[0]), pin=host,
                               namespace="ns2", name=name))
        elif event == "placeholder" and host:
            self.put(plain_pod(f"placeholder-{which}", gpus, at, node=host, namespace="ns",
                               labels={PLACEHOLDER_LABEL: f"g{which}"}))
        elif event == "shuffle":
            # The caller's list in another order (a relist): nothing else changed.
            self.pods = dict(reversed(list(self.pods.items())))
        elif event == "leave":
            bound = sorted(u for u, p in self.pods.items() if p["spec"].get("nodeName"))
            self.leaving = frozenset(bound[which % len(bound):][:1]) if bound else frozenset()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events)
def test_after_every_event_the_planner_decides_what_a_fresh_plan_decides(
    sequence: list[tuple[str, int, int, int, float]],
) -> None:
    planner = Planner(SHORT)
    cluster = Cluster(SHORT)
    at = EPOCH
    for step, (event, which, size, gpus, gap) in enumerate(sequence):
        at += gap
        cluster.apply(event, which, size, gpus, at)
        infos, nodes = cluster.infos(), list(cluster.nodes.values())
        ours = planner.plan(infos, nodes, at, leaving=cluster.leaving)
        fresh = plan(infos, nodes, SHORT, at, leaving=cluster.leaving)
        assert decisions(ours) == decisions(fresh), (step, event)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events, st.lists(st.sampled_from(GAPS), min_size=1, max_size=5))
def test_passes_with_nothing_changed_decide_what_a_fresh_plan_decides_at_any_later_time(
    sequence: list[tuple[str, int, int, int, float]], waits: list[float],
) -> None:
    """Pass after pass on one state, the clock moving on: with the caller's promise
    that nothing changed (`version`: the last plan aged) and without it (each gang's
    decision re-used until a deadline it waits for)."""
    promised, unpromised = Planner(SHORT), Planner(SHORT)
    cluster = Cluster(SHORT)
    at = EPOCH
    for version, (event, which, size, gpus, _) in enumerate(sequence):
        cluster.apply(event, which, size, gpus, at)
        infos, nodes = cluster.infos(), list(cluster.nodes.values())
        for wait in waits:
            at += wait
            fresh = decisions(plan(infos, nodes, SHORT, at, leaving=cluster.leaving))
            for planner, promise in ((promised, version), (unpromised, None)):
                ours = planner.plan(infos, nodes, at, version=promise, leaving=cluster.leaving)
                assert decisions(ours) == fresh, (at - EPOCH, promise)


def test_a_pass_after_one_gang_binds_decides_that_gang_alone() -> None:
    """The cost follows the change: four gangs released and in flight, one binds; the
    next pass decides that gang and re-uses the other three, and plans the same."""
    planner = Planner(SHORT)
    cluster = Cluster(SHORT)
    for gang in (0, 3, 6):
        cluster.apply("gang", gang, 2, 2, EPOCH)
    cluster.apply("gang", 9, 4, 8, EPOCH + 1)  # 32 GPUs on 24: waits
    infos, nodes = cluster.infos(), list(cluster.nodes.values())
    planner.plan(infos, nodes, EPOCH + 1)
    for gang in (0, 3, 6):
        cluster.apply("release", gang, 2, 2, EPOCH + 2)
    planner.plan(cluster.infos(), nodes, EPOCH + 2)
    cluster.apply("bind", 3, 2, 2, EPOCH + 3)
    infos = cluster.infos()
    ours = planner.plan(infos, nodes, EPOCH + 3)
    assert decisions(ours) == decisions(plan(infos, nodes, SHORT, EPOCH + 3))
    assert (planner.decided, planner.replayed) == (1, 3)
    assert [r.state for r in ours.reports] == ["releasing", "released", "releasing", "waiting"]


def _pass(planner: Planner, cluster: Cluster, at: float) -> list[tuple[str, str]]:
    """One pass of the planner, checked against a fresh plan: (state, code) per gang."""
    infos, nodes = cluster.infos(), list(cluster.nodes.values())
    ours = planner.plan(infos, nodes, at, leaving=cluster.leaving)
    assert decisions(ours) == decisions(plan(infos, nodes, SHORT, at, leaving=cluster.leaving))
    return [(r.state, r.code) for r in ours.reports]


def test_a_waiting_gang_preempts_once_lower_priority_work_is_bound_and_waits_for_it_to_go(
) -> None:
    """Lower-priority work in flight is no victim; bound (where it was placed: nothing
    else changed for the gang waiting) it is, and once it is leaving the gang waits
    for it. The waiting gang's decision must not be re-used across either change."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    cluster.apply("gang", 0, 2, 4, EPOCH)  # priority 0
    assert _pass(planner, cluster, EPOCH) == [("releasing", "")]
    cluster.apply("release", 0, 2, 4, EPOCH + 1)  # in flight on n0
    cluster.apply("gang", 2, 3, 8, EPOCH + 1)  # priority 200: all 24 GPUs
    assert _pass(planner, cluster, EPOCH + 1) == [("waiting", "no-fit"), ("releasing", "")]
    cluster.apply("bind", 0, 2, 4, EPOCH + 2)
    assert _pass(planner, cluster, EPOCH + 2) == [("waiting", "preempting"), ("released", "")]
    cluster.leaving = frozenset(u for u in cluster.pods if u.startswith("g0-"))
    assert _pass(planner, cluster, EPOCH + 3)[0] == ("waiting", "preempting")
    assert planner.decided == 2  # not re-used: `leaving` changed


def test_a_gang_in_flight_deleted_frees_its_node_for_the_gang_waiting() -> None:
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    cluster.apply("gang", 0, 2, 4, EPOCH)
    _pass(planner, cluster, EPOCH)
    cluster.apply("release", 0, 2, 4, EPOCH + 1)
    cluster.apply("gang", 3, 3, 8, EPOCH + 1)  # priority 0, younger: waits for all 24
    assert _pass(planner, cluster, EPOCH + 1) == [("releasing", ""), ("waiting", "no-fit")]
    cluster.apply("drop", 0, 2, 4, EPOCH + 2)
    assert _pass(planner, cluster, EPOCH + 2) == [("releasing", "")]


def test_pods_tied_on_creation_and_name_are_placed_alike_in_any_listed_order() -> None:
    """Two pods in flight on n0, of two namespaces, with one name and creation second:
    first-fit takes them in one total order (`flight_order`: namespace and uid break
    the tie), so a reordered list, with nothing else changed, moves nothing and
    decides nothing again."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    for name in ("n1", "n2"):
        del cluster.nodes[name]
    cluster.put(plain_pod("x", 4, EPOCH, pin="n0", namespace="a", name="w"))
    cluster.put(plain_pod("y", 8, EPOCH, pin="n0", namespace="b", name="w"))
    cluster.apply("gang", 0, 1, 4, EPOCH)
    assert _pass(planner, cluster, EPOCH) == [("releasing", "")]
    cluster.apply("shuffle", 0, 1, 4, EPOCH)
    assert _pass(planner, cluster, EPOCH) == [("releasing", "")]
    assert planner.decided == 0


def test_a_replacement_member_without_room_is_decided_again_as_its_wait_grows() -> None:
    """A released gang's member recreated gated finds no room: its reason counts the
    seconds it has waited (read from the clock), so it is never re-used; with room,
    the trial placement that found it is not counted again for the gang after it."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    cluster.apply("gang", 0, 2, 8, EPOCH)
    _pass(planner, cluster, EPOCH)
    cluster.apply("bind", 0, 2, 8, EPOCH)  # both on n0 (16 on 8: as bound)
    cluster.apply("stray", 1, 1, 8, EPOCH)  # n1 full
    cluster.apply("stray", 2, 1, 8, EPOCH)  # n2 full
    cluster.apply("replace", 0, 2, 4, EPOCH + 1)  # 4 GPUs
    assert _pass(planner, cluster, EPOCH + 1) == [("releasing", "")]
    _pass(planner, cluster, EPOCH + 6)
    assert planner.decided == 1
    cluster.remove("stray-2")  # room on n2 for the replacement, and 4 GPUs beside it
    assert _pass(planner, cluster, EPOCH + 7) == [("releasing", "")]
    cluster.apply("gang", 3, 1, 4, EPOCH + 8)
    assert _pass(planner, cluster, EPOCH + 8) == [("releasing", ""), ("releasing", "")]
    assert planner.replayed == 1


def test_a_later_member_arriving_moves_the_room_held_for_those_still_to_come() -> None:
    """Gang 1 has two members that arrive only after release; the room held for them
    (before every gang is decided) shrinks as they come, and the gang after it fits."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    for name in ("n1", "n2"):
        del cluster.nodes[name]
    cluster.apply("gang", 1, 1, 2, EPOCH)  # 1 member + 2 later, 2 GPUs each
    _pass(planner, cluster, EPOCH)
    cluster.apply("release", 1, 1, 2, EPOCH + 1)  # in flight on n0, later room held
    cluster.apply("gang", 3, 1, 3, EPOCH + 1)  # 3 GPUs: 2 free beside 2 + 2 x 2
    assert _pass(planner, cluster, EPOCH + 1) == [("releasing", ""), ("waiting", "no-fit")]
    cluster.apply("arrive", 1, 1, 1, EPOCH + 2)  # one comes, gated, with 1 GPU
    assert _pass(planner, cluster, EPOCH + 2) == [("releasing", ""), ("releasing", "")]


def test_a_gang_after_two_that_swapped_the_nodes_they_hold_names_its_new_holder() -> None:
    """The same nodes held, by other gangs: g0 held both nodes and now, its members
    narrowed to pool a, holds n0 only, so g9 (pool b) holds n1. g24 (pool b), unchanged
    itself, is held by g9 now, not by g0."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    del cluster.nodes["n2"]
    cluster.apply("relabel", 1, 1, 8, EPOCH)  # n1: pool b
    cluster.put(plain_pod("busy", 1, EPOCH, node="n0"))
    cluster.put(plain_pod("busy-b", 1, EPOCH, node="n1"))
    for index in range(2):
        cluster.put(member(0, index, 2, 8, created=EPOCH))  # 16 GPUs, 14 free
    cluster.put(member(9, 0, 1, 8, created=EPOCH + 1))
    cluster.put(member(24, 0, 1, 8, created=EPOCH + 2))
    assert _pass(planner, cluster, EPOCH + 2) == [("waiting", "no-fit"), ("waiting", "held"),
                                                  ("waiting", "held")]
    cluster.remove("g0-1")
    cluster.put(member(0, 0, 1, 8, created=EPOCH, pool="a"))
    assert _pass(planner, cluster, EPOCH + 3) == [("waiting", "no-fit"), ("waiting", "no-fit"),
                                                  ("waiting", "held")]
    reports = planner.plan(cluster.infos(), list(cluster.nodes.values()), EPOCH + 3).reports
    assert "held for ns/g9" in reports[2].reason


def test_a_placeholder_that_takes_no_room_still_goes_with_its_gangs_release() -> None:
    """A placeholder moves no fleet (no GPUs, not bound): its gang's release, re-used
    otherwise, must name it."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    cluster.apply("gang", 0, 1, 2, EPOCH)
    _pass(planner, cluster, EPOCH)
    cluster.put(plain_pod("placeholder-0", 0, EPOCH + 1, namespace="ns",
                          labels={PLACEHOLDER_LABEL: "g0"}))
    ours = planner.plan(cluster.infos(), list(cluster.nodes.values()), EPOCH + 1)
    _pass(planner, cluster, EPOCH + 1)
    assert [p.uid for p in ours.releases[0].placeholders] == ["placeholder-0"]


def test_a_gang_arriving_takes_the_last_passes_fleet_only_when_it_comes_after_all() -> None:
    """The fleet a pass ends with is the next pass's start for a gang arriving after
    every other: not for one of higher priority, which comes before the gang holding
    every node; and not when some gang's changes were never applied to it (the pass
    re-used them after the last gang it decided)."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    cluster.apply("gang", 0, 1, 2, EPOCH)  # priority 0
    _pass(planner, cluster, EPOCH)
    cluster.apply("release", 0, 1, 2, EPOCH + 1)
    cluster.apply("gang", 3, 3, 8, EPOCH + 1)  # priority 0: all 24 GPUs, holds them
    assert _pass(planner, cluster, EPOCH + 1) == [("releasing", ""), ("waiting", "no-fit")]
    cluster.apply("touch", 0, 1, 2, EPOCH + 2)  # g0 decided again, g3 re-used after it
    _pass(planner, cluster, EPOCH + 2)
    cluster.apply("gang", 6, 1, 1, EPOCH + 3)  # priority 0, last: held for g3
    assert _pass(planner, cluster, EPOCH + 3)[2] == ("waiting", "held")
    cluster.apply("gang", 2, 1, 1, EPOCH + 4)  # priority 200, first: fits beside g0
    assert _pass(planner, cluster, EPOCH + 4)[0] == ("releasing", "")


def test_a_gang_gone_before_its_release_was_applied_frees_its_room_for_the_next() -> None:
    """g0's release took all 24 GPUs in the pass that decided it; g0 deleted before
    its patches went out, a pass decides nothing; g3 arriving then has the fleet."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    cluster.apply("gang", 0, 3, 8, EPOCH)
    assert _pass(planner, cluster, EPOCH) == [("releasing", "")]
    cluster.apply("drop", 0, 3, 8, EPOCH + 1)
    assert _pass(planner, cluster, EPOCH + 1) == []
    cluster.apply("gang", 3, 1, 8, EPOCH + 2)
    assert _pass(planner, cluster, EPOCH + 2) == [("releasing", "")]


def test_a_re_used_release_found_by_a_trial_placement_is_counted_once() -> None:
    """g0's replacement member was released where a trial placement found room (tried,
    taken back, placed): re-used in the next pass and applied to a copy of its start
    (g3 after it is decided again), it counts once: g3 is told 4 GPUs are free."""
    planner, cluster = Planner(SHORT), Cluster(SHORT)
    cluster.apply("gang", 0, 2, 8, EPOCH)
    _pass(planner, cluster, EPOCH)
    cluster.apply("bind", 0, 2, 8, EPOCH)  # both on n0
    cluster.apply("stray", 1, 1, 8, EPOCH)  # n1 full
    cluster.apply("replace", 0, 2, 4, EPOCH + 1)  # 4 GPUs: room on n2
    cluster.apply("gang", 3, 1, 8, EPOCH + 1)  # 8 GPUs: waits, holds every node
    assert _pass(planner, cluster, EPOCH + 1) == [("releasing", ""), ("waiting", "no-fit")]
    cluster.apply("touch", 3, 1, 8, EPOCH + 2)
    assert _pass(planner, cluster, EPOCH + 2) == [("releasing", ""), ("waiting", "no-fit")]
    assert (planner.decided, planner.replayed) == (1, 1)
