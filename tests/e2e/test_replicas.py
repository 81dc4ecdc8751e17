"""Two gangkeeper replicas sharing the Lease, as deployed (issue 14, "Two replicas").

The sandbox's `gangkeeper serve` (the one the API server calls) and a second one
started on another port (`Faults.start_replica`) compete for the Lease
`gangkeeper-controller`; the second is made the leader first so the test can crash
or pause it while the sandbox's own keeps answering the API server. Faults are
injected deterministically with `GANGKEEPER_FAULT` (read only by the controller,
`webhook/controller/faults.py`): the leader SIGKILLs or SIGSTOPs itself at a named
step of a release. No API server, scheduler or controller is mocked.

- kill the leader in the middle of a release: the follower takes over within the
  lease duration (+ one retry period) and finishes every gang; no duplicate
  releases, no Event storm;
- pause (SIGSTOP) the leader mid-burst past its lease, let the follower finish, then
  resume it: it steps down, and the writes it was about to make are fenced (counted,
  never sent);
- both replicas answer admission (each probed directly) throughout.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from typing import Any

import pytest
from builders.faults import (
    LEASE_SECONDS,
    RETRY_SECONDS,
    cordoned_pool,
    count_gated,
    create_gangs,
    events,
    identity_of,
    leading_replica,
    lease_holder,
    metrics,
    review_answer,
    settled_gated,
    settled_metrics,
    uncordon,
    wait_all_gated,
    wait_dead,
    wait_released_and_bound,
    wait_stopped,
)

REPLICA = "gangkeeper-replica"
UNGATED = "gangkeeper_gang_ungated_pods_total"
FENCED = "gangkeeper_controller_fenced_writes_total"
REFUSED = "gangkeeper_gang_ungate_errors_total"


@pytest.fixture(autouse=True)
def _sandbox_only(cluster: Any) -> None:
    if cluster.sandbox is None:
        pytest.skip("two replicas as processes need the sandbox")


def _main_url(cluster: Any) -> str:
    """The sandbox's own admission server (the one the API server calls)."""
    return str(cluster.sandbox.state()["gangkeeper_url"])


def _main_controller(cluster: Any) -> str:
    """The sandbox's own gang controller's /metrics (its own process by default)."""
    return str(cluster.sandbox.controller_url)


def test_killing_the_leader_mid_release_hands_over_within_the_lease_and_every_gang_finishes(
    cluster: Any, gang_namespace: str
) -> None:
    gangs, size = 4, 30
    pool, nodes = cordoned_pool(cluster, "handover", 4, 30)
    env = {"GANGKEEPER_FAULT": "kill:mid-burst:25"}
    with leading_replica(cluster, REPLICA, env) as (faults, url):
        for where in (url, _main_url(cluster)):  # both answer admission
            answer = review_answer(cluster, where, gang_namespace, pool)
            assert answer["allowed"] is True, answer
            assert answer["patch"], "the pod is gang-keyed (gated) by either replica"
        main_before = metrics(cluster, _main_controller(cluster))
        total = create_gangs(cluster, gang_namespace, pool, gangs, size)
        wait_all_gated(cluster, gang_namespace, total)
        uncordon(cluster, nodes)  # the leader plans the release and dies mid-burst
        died = wait_dead(faults, REPLICA)
        # Counted once the dead leader's last PATCHes have landed (CI once saw 75 at the
        # instant of death and 72 a moment later); the follower waits out the Lease first.
        left = settled_gated(cluster, gang_namespace)
        assert 0 < left < total, f"the fault should cut the burst short ({left} gated)"
        follower = identity_of(faults, cluster.sandbox.controller_process)
        cluster.wait_for(lambda: lease_holder(cluster) == follower, timeout=LEASE_SECONDS + 30,
                         interval=0.1, message="the follower takes the Lease")
        takeover = time.monotonic() - died
        cluster.wait_for(lambda: count_gated(cluster, gang_namespace) == 0,
                         timeout=LEASE_SECONDS + 60, message="the follower lifts every gate")
        finished = time.monotonic() - died
        print(f"takeover: the follower led {takeover:.1f}s after the leader died and had "
              f"lifted the {left} gates left of {total} {finished:.1f}s after")
        # The lease lasts 15 s from the follower's last sight of a renewal (at most one
        # retry period before the crash); the slack is for a loaded API server.
        assert takeover <= LEASE_SECONDS + RETRY_SECONDS + 5.0
        wait_released_and_bound(cluster, gang_namespace, total, timeout=120)
        main_after = settled_metrics(cluster, _main_controller(cluster), (UNGATED,))
    released_by_follower = (main_after.get(UNGATED, 0.0)
                            - main_before.get(UNGATED, 0.0))
    assert released_by_follower == left, "each remaining gate lifted exactly once"
    # No storm: at most one Event per pod the follower released (GangMemberRejoined).
    seen = Counter((e["reason"], e["regarding"]["name"]) for e in events(cluster, gang_namespace))
    assert max(seen.values(), default=0) <= 1, seen.most_common(3)
    assert sum(seen.values()) <= left
    assert {reason for reason, _ in seen} <= {"GangMemberRejoined"}


def test_a_leader_paused_past_its_lease_steps_down_on_resume_and_its_pending_writes_are_fenced(
    cluster: Any, gang_namespace: str
) -> None:
    size = 60
    pool, nodes = cordoned_pool(cluster, "paused", 2, 30)
    env = {"GANGKEEPER_FAULT": "stop:mid-burst:10"}
    with leading_replica(cluster, REPLICA, env) as (faults, url):
        main_before = metrics(cluster, _main_controller(cluster))
        total = create_gangs(cluster, gang_namespace, pool, 1, size)
        wait_all_gated(cluster, gang_namespace, total)
        uncordon(cluster, nodes)
        wait_stopped(faults, REPLICA)  # SIGSTOP, by its own hand, after 10 gates
        left = count_gated(cluster, gang_namespace)
        assert 0 < left < total
        # The follower waits the lease out, then finishes the gang (rule 2 of the plan).
        cluster.wait_for(lambda: count_gated(cluster, gang_namespace) == 0,
                         timeout=LEASE_SECONDS + 45, message="the follower lifts every gate")
        assert lease_holder(cluster) == identity_of(faults, cluster.sandbox.controller_process)
        faults.signal(REPLICA, signal.SIGCONT)

        def stepped_down() -> dict[str, float] | None:
            found = metrics(cluster, url)
            return found if found.get("gangkeeper_controller_leader") == 0.0 else None

        resumed = cluster.wait_for(stepped_down, timeout=30, message="the resumed replica "
                                   "reports it does not lead")
        # Time for anything it would still write (at least two retry periods, longer while
        # its counts still change), and for the follower's last count.
        resumed = settled_metrics(cluster, url, (UNGATED, FENCED, REFUSED),
                                  quiet=2 * RETRY_SECONDS)
        main_after = settled_metrics(cluster, _main_controller(cluster), (UNGATED,))
        # Both still answer admission.
        for where in (url, _main_url(cluster)):
            answer = review_answer(cluster, where, gang_namespace, pool)
            assert answer["allowed"] is True, answer
            assert answer["patch"], "the pod is gang-keyed (gated) by either replica"
        leader = identity_of(faults, cluster.sandbox.controller_process)
        assert lease_holder(cluster) == leader, "no flapping back"
    lifted = resumed.get(UNGATED, 0.0)
    fenced = resumed.get(FENCED, 0.0)
    refused = resumed.get(REFUSED, 0.0)
    print(f"paused leader: {lifted:.0f} gates lifted before the pause, {fenced:.0f} writes "
          f"fenced (never sent), {refused:.0f} sent on waking and refused by the API server")
    # Every member of the burst had one fate: lifted while leading, fenced (the deadline
    # check before sending), or — built before the pause and sent on waking — refused by
    # the API server on its preconditions (the gate and resourceVersion tests).
    assert fenced >= 1, "the burst's remaining writes must be fenced, not sent"
    assert lifted + fenced + refused == total
    log = faults.processes.logs / f"{REPLICA}.log"
    assert "ungating" not in log.read_text(), "a write failed other than on a precondition"
    by_follower = (main_after.get(UNGATED, 0.0)
                   - main_before.get(UNGATED, 0.0))
    assert resumed.get(UNGATED, 0.0) + by_follower == total, (
        "every gate lifted exactly once between the two"
    )
    wait_released_and_bound(cluster, gang_namespace, total, timeout=120)
