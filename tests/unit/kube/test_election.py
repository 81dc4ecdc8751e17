"""Lease decisions, as client-go's leader election makes them."""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.webhook.kube.election import (
    Observation,
    next_lease,
    released_lease,
)

WALL = 1_800_000_000.0


def lease(holder: str, *, renew: str = "2027-01-15T07:59:50.000000Z", duration: int = 15,
          transitions: int = 2, version: str = "41") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "gangkeeper-controller", "namespace": "gk", "resourceVersion": version
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "acquireTime": "2027-01-15T07:00:00.000000Z",
            "renewTime": renew,
            "leaseTransitions": transitions,
        },
    }


def step(current: dict[str, Any] | None, *, me: str = "me", monotonic: float = 100.0,
         observed: Observation | None = None) -> Any:
    return next_lease(current, name="gangkeeper-controller", namespace="gk", identity=me,
                      duration_seconds=15, wall=WALL, monotonic=monotonic, observed=observed)


def test_no_lease_yet_means_create_one_held_by_us() -> None:
    s = step(None)
    assert s.action == "create"
    assert s.body["spec"]["holderIdentity"] == "me"
    assert s.body["spec"]["leaseDurationSeconds"] == 15
    assert s.body["spec"]["leaseTransitions"] == 0
    assert s.body["spec"]["renewTime"].endswith("Z")


def test_our_own_lease_is_renewed_keeping_acquire_time_and_transitions() -> None:
    s = step(lease("me"))
    assert s.action == "update"
    spec = s.body["spec"]
    assert spec["acquireTime"] == "2027-01-15T07:00:00.000000Z"
    assert spec["leaseTransitions"] == 2
    assert spec["renewTime"] == "2027-01-15T08:00:00.000000Z"  # our wall clock
    # Optimistic concurrency: the write carries the version we read.
    assert s.body["metadata"]["resourceVersion"] == "41"


def test_a_lease_held_by_another_live_replica_is_left_alone() -> None:
    s = step(lease("other"), monotonic=100.0)
    assert (s.action, s.holder) == ("wait", "other")


@pytest.mark.parametrize(("elapsed", "action"), [(0.0, "wait"), (14.9, "wait"), (15.0, "update")])
def test_another_holder_expires_lease_duration_after_we_saw_it_change(
    elapsed: float, action: str
) -> None:
    first = step(lease("other"), monotonic=100.0)
    later = step(lease("other"), monotonic=100.0 + elapsed, observed=first.observation)
    assert later.action == action
    if action == "update":
        assert later.body["spec"]["holderIdentity"] == "me"
        assert later.body["spec"]["leaseTransitions"] == 3


def test_expiry_is_judged_on_our_clock_not_on_the_holders_renew_time() -> None:
    # renewTime is years old, but we have only just seen the record: not expired yet.
    s = step(lease("other", renew="2001-01-01T00:00:00.000000Z"), monotonic=500.0)
    assert s.action == "wait"


def test_a_renewal_by_the_holder_restarts_the_expiry_clock() -> None:
    first = step(lease("other", renew="2027-01-15T08:00:00.000000Z"), monotonic=100.0)
    renewed = step(lease("other", renew="2027-01-15T08:00:10.000000Z"), monotonic=110.0,
                   observed=first.observation)
    assert renewed.action == "wait"
    after = step(lease("other", renew="2027-01-15T08:00:10.000000Z"), monotonic=120.0,
                 observed=renewed.observation)
    assert after.action == "wait"  # 10 s since the renewal was seen < 15 s
    gone = step(lease("other", renew="2027-01-15T08:00:10.000000Z"), monotonic=125.5,
                observed=after.observation)
    assert gone.action == "update"


def test_a_released_lease_is_taken_at_once() -> None:
    s = step(lease("", duration=1))
    assert s.action == "update"
    assert s.body["spec"]["holderIdentity"] == "me"


def test_giving_up_clears_the_holder_only_when_we_hold_it() -> None:
    body = released_lease(lease("me"), "me")
    assert body is not None
    assert body["spec"]["holderIdentity"] == ""
    assert body["metadata"]["resourceVersion"] == "41"
    assert released_lease(lease("other"), "me") is None
