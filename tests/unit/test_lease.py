"""Leader election's I/O loop against the in-memory `FakeApi`: one leader, handover on release."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.lease import LeaderElector

LEASES = "/apis/coordination.k8s.io/v1/leases"


def elector(api: FakeApi, identity: str) -> LeaderElector:
    return LeaderElector(
        api, namespace="gk", name="lock", identity=identity, lease_duration=5.0,
        renew_deadline=3.0, retry_period=0.01, write_query=(("fieldManager", "gk"),),
    )


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 5
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_one_of_two_replicas_leads_and_a_release_hands_the_lease_over() -> None:
    api = FakeApi()
    first, second = elector(api, "a"), elector(api, "b")
    stop_first, stop_second = threading.Event(), threading.Event()
    threading.Thread(target=first.run, args=(stop_first,), daemon=True).start()
    eventually(lambda: first.is_leader, "a leads")
    threading.Thread(target=second.run, args=(stop_second,), daemon=True).start()
    time.sleep(0.1)
    assert not second.is_leader
    stop_first.set()
    first.release()
    eventually(lambda: second.is_leader, "b takes over once a gives up")
    stop_second.set()
    lease = api.objects[LEASES]["gk/lock"]
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    writes = [q for method, _, q in api.calls if method in ("POST", "PUT")]
    assert writes and all(q == {"fieldManager": "gk"} for q in writes)
