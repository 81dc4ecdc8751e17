"""Leader election's I/O loop against the in-memory `FakeApi`: one leader, handover on release."""

from __future__ import annotations

import threading
import time

from builders.polling import wait_for

from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.lease import LeaderElector

LEASES = "/apis/coordination.k8s.io/v1/leases"


def elector(api: FakeApi, identity: str) -> LeaderElector:
    return LeaderElector(
        api, namespace="gk", name="lock", identity=identity, lease_duration=5.0,
        renew_deadline=3.0, retry_period=0.01, write_query=(("fieldManager", "gk"),),
    )


def test_one_of_two_replicas_leads_and_a_release_hands_the_lease_over() -> None:
    api = FakeApi()
    first, second = elector(api, "a"), elector(api, "b")
    stop_first, stop_second = threading.Event(), threading.Event()
    threading.Thread(target=first.run, args=(stop_first,), daemon=True).start()
    wait_for(lambda: first.is_leader, message="a leads", timeout=5)
    threading.Thread(target=second.run, args=(stop_second,), daemon=True).start()
    time.sleep(0.1)
    assert not second.is_leader
    stop_first.set()
    first.release()
    wait_for(lambda: second.is_leader, message="b takes over once a gives up", timeout=5)
    stop_second.set()
    lease = api.objects[LEASES]["gk/lock"]
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1
    writes = [q for method, _, q in api.calls if method in ("POST", "PUT")]
    assert writes and all(q == {"fieldManager": "gk"} for q in writes)
