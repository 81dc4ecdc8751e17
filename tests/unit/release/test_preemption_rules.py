"""Gang-aware preemption as `policies/release/preemption.py` and docs/preemption.md state
it: a complete, gated gang of higher priority that does not fit takes the room of
lower-priority work on the nodes it may use; gangs go whole (requeued through their
owner), pods of no gang one by one (evicted), ranked as kube-scheduler ranks victims."""

from __future__ import annotations

from builders.gangs import T0, node
from builders.preemption import (
    budget,
    planned,
    running_gang,
    running_pod,
    waiting_gang,
)

from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.dra.classes import read_device_class
from gangkeeper.policies.dra.extended import with_device_resources
from gangkeeper.policies.release.preemption import Unit
from gangkeeper.policies.settings.config import Config

FOUR = [node(f"n{i}", 8) for i in range(4)]


def _full_of_low_jobs(priority: int = 10) -> list[dict[str, object]]:
    # Four low Jobs of one 8-GPU member each fill 4 x 8 GPUs; started a minute apart.
    return [
        raw
        for i in range(4)
        for raw in running_gang(f"low{i}", [f"n{i}"], 8, priority, started=T0 + 60 * i)
    ]


def test_a_high_gang_preempts_exactly_the_two_low_jobs_it_needs_whole() -> None:
    high = waiting_gang("high", 2, 8, 1000)
    result = planned([*_full_of_low_jobs(), *high], FOUR)
    assert result.releases == ()
    (found,) = result.preemptions
    assert found.preemptor.label == "high"
    # Equal priorities and sizes: the latest started go (kube-scheduler's last key).
    assert sorted(u.gang.label for u in found.victims if u.gang) == ["low2", "low3"]
    assert sorted((r.gang.label, r.how, r.whole, r.cause) for r in found.requeues) == [
        (label, "suspend", True, "preempted") for label in ("low2", "low3")
    ]
    assert found.evictions == ()
    assert found.gpus == 16
    report = {r.label: r for r in result.reports}["high"]
    assert report.state == "waiting" and report.code == "preempting"
    assert "preempting 2 gangs of lower priority (16 GPUs)" in report.reason


def test_preemption_policy_never_preempts_nothing_and_says_why() -> None:
    high = waiting_gang("high", 2, 8, 1000, never=True)
    result = planned([*_full_of_low_jobs(), *high], FOUR)
    assert result.preemptions == ()
    report = {r.label: r for r in result.reports}["high"]
    assert report.code == "no-fit"
    assert "preemptionPolicy: Never" in report.reason


def test_equal_priority_preempts_nothing() -> None:
    high = waiting_gang("high", 2, 8, 10)
    result = planned([*_full_of_low_jobs(10), *high], FOUR)
    assert result.preemptions == ()
    assert {r.label: r for r in result.reports}["high"].code == "no-fit"


def test_preemption_off_in_the_namespace_preempts_nothing() -> None:
    high = waiting_gang("high", 2, 8, 1000)
    config = Config(namespace_preemption={"team": "off"})
    result = planned([*_full_of_low_jobs(), *high], FOUR, config=config)
    assert result.preemptions == ()
    assert "preemption is off" in {r.label: r for r in result.reports}["high"].reason


def test_victims_on_nodes_the_preemptor_may_not_use_are_never_taken() -> None:
    nodes = [node("a0", 8, labels={"pool": "a"}), node("b0", 8, labels={"pool": "b"}),
             node("b1", 8, labels={"pool": "b"})]
    low = [
        *running_gang("on-a", ["a0"], 8, 5, started=T0),  # the lowest, but on pool a
        *running_gang("on-b0", ["b0"], 8, 10, started=T0 + 10),
        *running_gang("on-b1", ["b1"], 8, 10, started=T0 + 20),
    ]
    high = waiting_gang("high", 1, 8, 1000, selector={"pool": "b"})
    (found,) = planned([*low, *high], nodes).preemptions
    assert [u.gang.label for u in found.victims if u.gang] == ["on-b1"]


def test_the_lowest_priority_goes_first_and_only_what_is_needed() -> None:
    low = [
        *running_gang("mid", ["n0"], 8, 50),
        *running_gang("low", ["n1"], 8, 10),
        *running_gang("mid2", ["n2"], 8, 50),
        *running_gang("mid3", ["n3"], 8, 50),
    ]
    (found,) = planned([*low, *waiting_gang("high", 1, 8, 1000)], FOUR).preemptions
    assert [u.gang.label for u in found.victims if u.gang] == ["low"]


def test_pods_of_no_gang_are_evicted_one_by_one_fewest_gpus_taken() -> None:
    nodes = [node("n0", 12)]
    # Same priority and start: only the GPUs taken tell them apart.
    pods = [running_pod("big", "n0", 8, 10), running_pod("small", "n0", 4, 10)]
    (found,) = planned([*pods, *waiting_gang("high", 1, 4, 1000)], nodes).preemptions
    assert [p.name for p in found.evictions] == ["small"] and found.requeues == ()


def test_a_pod_a_budget_protects_is_spared_when_another_makes_room() -> None:
    nodes = [node("n0", 8), node("n1", 8)]
    pods = [
        running_pod("guarded", "n0", 8, 5, labels={"app": "db"}),  # the lowest priority
        running_pod("plain", "n1", 8, 10),
    ]
    result = planned([*pods, *waiting_gang("high", 1, 8, 1000)], nodes,
                     budgets=[budget("db", {"app": "db"}, 0)])
    (found,) = result.preemptions
    assert [p.name for p in found.evictions] == ["plain"]


def test_a_gang_waits_naming_the_budget_when_only_protected_pods_would_make_room() -> None:
    nodes = [node("n0", 8)]
    pods = [running_pod("guarded", "n0", 8, 5, labels={"app": "db"})]
    result = planned([*pods, *waiting_gang("high", 1, 8, 1000)], nodes,
                     budgets=[budget("db", {"app": "db"}, 0)])
    assert result.preemptions == ()
    reason = {r.label: r for r in result.reports}["high"].reason
    assert "PodDisruptionBudget team/db allows no more disruptions" in reason


def test_victims_already_leaving_are_waited_for_not_preempted_again() -> None:
    low = _full_of_low_jobs()
    leaving = frozenset(p["metadata"]["uid"] for p in low[2:])  # low2, low3 chosen before
    result = planned([*low, *waiting_gang("high", 2, 8, 1000)], FOUR, leaving=leaving)
    assert result.preemptions == ()
    report = {r.label: r for r in result.reports}["high"]
    assert report.code == "preempting"
    assert "fits once 2 pods leaving are gone" in report.reason


def test_a_gang_that_could_never_fit_preempts_nothing() -> None:
    result = planned([*_full_of_low_jobs(), *waiting_gang("huge", 5, 8, 1000)], FOUR)
    assert result.preemptions == ()


def test_two_preemptors_in_one_pass_never_take_the_same_victims() -> None:
    first = waiting_gang("first", 1, 8, 1000, created=T0 + 100)
    second = waiting_gang("second", 1, 8, 1000, created=T0 + 200)
    result = planned([*_full_of_low_jobs(), *first, *second], FOUR)
    # The older waiting gang holds every node it may use: the second waits behind it
    # rather than preempting as well.
    assert [p.preemptor.label for p in result.preemptions] == ["first"]
    taken = [p.uid for found in result.preemptions for p in found.pods]
    assert len(taken) == len(set(taken)) == 1


def test_no_preemption_is_considered_when_all_work_has_the_same_priority() -> None:
    # The common case at scale (no PriorityClasses): nothing to preempt, nothing said.
    result = planned([*_full_of_low_jobs(0), *waiting_gang("next", 2, 8, 0)], FOUR)
    assert result.preemptions == ()
    assert "preempt" not in {r.label: r for r in result.reports}["next"].reason


def test_the_high_gang_gets_the_room_whether_the_mid_gang_was_released_first_or_not() -> None:
    """Issue 24: a mid gang that fits and a high gang of the same size a moment later.
    Whether the controller's pass saw the mid one alone first (released, bound) or both
    together is a race of milliseconds; the outcome must not depend on it."""
    two = FOUR[:2]
    # Both seen in one pass: the higher priority goes first, the mid one waits.
    together = planned([*waiting_gang("mid", 2, 8, 500, created=T0 + 100),
                        *waiting_gang("high", 2, 8, 1000, created=T0 + 101)], two)
    assert [r.gang.label for r in together.releases] == ["high"]
    assert {r.label: r.state for r in together.reports}["mid"] == "waiting"
    # The mid one already released and bound: the high one takes its room, whole.
    after = planned([*running_gang("mid", ["n0", "n1"], 8, 500, started=T0 + 100),
                     *waiting_gang("high", 2, 8, 1000, created=T0 + 101)], two)
    (found,) = after.preemptions
    assert found.preemptor.label == "high"
    assert [u.gang.label for u in found.victims if u.gang] == ["mid"]
    assert [(r.gang.label, r.whole) for r in found.requeues] == [("mid", True)]


def test_a_victim_asking_every_device_counts_its_devices_not_its_whole_node_as_gpus() -> None:
    # A member of `allocationMode: All` asks 8 devices of its class and the class's
    # whole node (`dra:<class>/all`): it takes 8, not 9 (the Event's summary, the
    # preempted-GPU metric and the ranking's tie-break read this).
    gpus = read_device_class({"metadata": {"name": "gpus"}, "spec": {}})
    config = with_device_resources(Config(), [gpus])
    limits = {"dra:gpus": "8", "dra:gpus/all": "1"}
    pod = pod_info({"metadata": {"name": "w", "namespace": "low", "uid": "w",
                                 "creationTimestamp": "2027-01-15T08:00:00Z"},
                    "spec": {"nodeName": "n0", "containers": [
                        {"name": "c", "resources": {"limits": limits}}]},
                    "status": {}}, config)  # fmt: skip
    assert pod.demand == {"dra:gpus": 8, "dra:gpus/all": 1}
    assert Unit((pod,), 0, "delete").gpus == 8
