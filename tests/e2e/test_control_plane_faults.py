"""Faults of the control plane under a release (issue 14, "Faults on the sandbox").

- kube-apiserver crashed (SIGKILL) and restarted in the middle of a 200-pod release;
- etcd crashed and restarted in the middle of a release;
- a forced etcd compaction while the API server is down, so that gangkeeper's
  watches resume from a version that no longer exists and get `410 Gone`: its
  informers re-list (counted), and a gang created meanwhile is not missed.
In each: no gang missed, none left gated that fits, none partly bound, each gate
lifted once (the sandbox's gangkeeper counts its lifted gates), no Event storm.

The API server and etcd are the sandbox's real processes, stopped and started again
with their recorded command lines (`gangkeeper.webhook.sandbox.faults`).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from builders.faults import (
    cordoned_pool,
    count_gated,
    create_gangs,
    events,
    gated,
    metrics,
    uncordon,
    wait_all_gated,
    wait_released_and_bound,
)
from kubernetes import watch

from gangkeeper.webhook.sandbox.faults import Faults

UNGATED = "gangkeeper_gang_ungated_pods_total"
RELISTS = "gangkeeper_controller_relists_total"


@pytest.fixture
def faults(cluster: Any) -> Faults:
    if cluster.sandbox is None:
        pytest.skip("restarting control-plane processes needs the sandbox")
    return Faults(cluster.sandbox)


def _url(cluster: Any) -> str:
    return str(cluster.sandbox.controller_url)  # the controller's /metrics


def _first_release(cluster: Any, namespace: str, since: str) -> None:
    """Block until the first gate of `namespace` is lifted (watch from `since`)."""
    stream = watch.Watch()
    for event in stream.stream(cluster.core.list_namespaced_pod, namespace,
                               resource_version=since, timeout_seconds=60):
        if not gated(event["object"]):
            stream.stop()
            return
    raise AssertionError("no gate lifted within 60 s")


def _no_storm(cluster: Any, namespace: str) -> None:
    seen = Counter((e["reason"], e["regarding"]["name"]) for e in events(cluster, namespace))
    assert max(seen.values(), default=0) <= 1, seen.most_common(3)


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_a_control_plane_restart_in_the_middle_of_a_200_pod_release_loses_nothing(
    cluster: Any, gang_namespace: str, faults: Faults, component: str
) -> None:
    pool, nodes = cordoned_pool(cluster, f"restart-{component[:4]}", 4, 50)
    total = create_gangs(cluster, gang_namespace, pool, 4, 50)  # 4 gangs of 50: 200 pods
    wait_all_gated(cluster, gang_namespace, total)
    before = metrics(cluster, _url(cluster))
    since = cluster.core.list_namespaced_pod(gang_namespace).metadata.resource_version
    uncordon(cluster, nodes)
    _first_release(cluster, gang_namespace, since)
    left = count_gated(cluster, gang_namespace)  # just before the crash
    started = time.monotonic()
    faults.restart(component, down_seconds=1.0, kill=True)  # a crash, mid-burst
    print(f"{component} crashed with {left} of {total} still gated, back in "
          f"{time.monotonic() - started:.1f}s")
    wait_released_and_bound(cluster, gang_namespace, total, timeout=180)
    after = metrics(cluster, _url(cluster))
    lifted = after.get(UNGATED, 0.0) - before.get(UNGATED, 0.0)
    # A patch whose answer was lost in the restart is not counted, but never repeated.
    assert lifted <= total, f"{lifted} gates lifted for {total} pods"
    _no_storm(cluster, gang_namespace)


def test_watches_that_get_410_after_a_forced_compaction_relist_and_miss_no_gang(
    cluster: Any, gang_namespace: str, faults: Faults
) -> None:
    pool, nodes = cordoned_pool(cluster, "compact", 2, 40)
    total = create_gangs(cluster, gang_namespace, pool, 2, 20)
    wait_all_gated(cluster, gang_namespace, total)
    before = metrics(cluster, _url(cluster))
    # History gangkeeper has seen, then compacted away while the API server is down:
    # its watches come back asking for versions etcd no longer has.
    for i in range(20):
        cluster.core.create_namespaced_config_map(gang_namespace, {"metadata": {"name": f"c{i}"}})
    compacted: list[int] = []
    faults.restart("kube-apiserver", while_down=lambda: compacted.append(faults.compact()))
    # A gang created after the compaction, and the cordoned ones released.
    total += create_gangs(cluster, gang_namespace, pool, 1, 20, prefix="late")
    uncordon(cluster, nodes)
    wait_released_and_bound(cluster, gang_namespace, total, timeout=180)
    after = metrics(cluster, _url(cluster))
    relists = after.get(RELISTS, 0.0) - before.get(RELISTS, 0.0)
    print(f"compacted at revision {compacted[0]}; gangkeeper re-listed {relists:.0f} times")
    assert relists >= 1, "a watch from a compacted version must end in a re-list"
    assert after.get(UNGATED, 0.0) - before.get(UNGATED, 0.0) <= total
    _no_storm(cluster, gang_namespace)
