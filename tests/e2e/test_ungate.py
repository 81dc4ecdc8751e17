"""`gangkeeper ungate` with gangkeeper scaled to zero (the sandbox's process stopped):
gated gangs are not lost, the gangs that fit now are released whole, the others are
listed with why they wait, and `--force` releases them with a warning.

Two gangs of 4 one-GPU pods are gated while their 4-GPU node is cordoned; gangkeeper
is stopped; the node is uncordoned: only one gang fits. Real API server, scheduler
and kwok; the command runs as a user would.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from builders.cluster import gang_pod
from builders.controllers import pinned_node
from builders.faults import cordoned_pool, count_gated, create_gangs, gated, pods, uncordon


def ungate(cluster: Any, namespace: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "ungate", "-n", namespace,
         "--kubeconfig", cluster.kubeconfig, *flags],
        capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture
def scaled_to_zero(cluster: Any) -> Iterator[None]:
    cluster.gangkeeper_stop()
    try:
        yield
    finally:
        cluster.gangkeeper_start()


def test_ungate_releases_only_the_gangs_that_fit_and_force_the_rest_with_a_warning(
    cluster: Any, gang_namespace: str, request: pytest.FixtureRequest
) -> None:
    pool, nodes = cordoned_pool(cluster, "ungate", 1, 4)
    total = create_gangs(cluster, gang_namespace, pool, 2, 4)  # g0 then g1, 4 GPUs each
    cluster.wait_for(lambda: count_gated(cluster, gang_namespace) == total, timeout=60,
                     message="both gangs gated")
    request.getfixturevalue("scaled_to_zero")
    uncordon(cluster, nodes)  # room for exactly one of them now

    dry = ungate(cluster, gang_namespace, "--dry-run")
    assert dry.returncode == 1, dry.stderr
    assert f"would release {gang_namespace}/g0: 4 of 4" in dry.stdout, dry.stdout
    assert count_gated(cluster, gang_namespace) == total, "--dry-run writes nothing"

    done = ungate(cluster, gang_namespace)
    assert done.returncode == 1, done.stderr  # a gang is left gated
    assert f"released {gang_namespace}/g0: 4 of 4 gated members (fits now)" in done.stdout
    assert f"left gated {gang_namespace}/g1: 4 members; needs 4 nvidia.com/gpu" in done.stdout
    cluster.wait_for(
        lambda: sum(1 for p in pods(cluster, gang_namespace) if p.spec.node_name) == 4,
        timeout=60, message="g0 bound whole, with no controller running",
    )
    by_gang = {p.metadata.name: p for p in pods(cluster, gang_namespace)}
    assert all(by_gang[f"g0-w{i:03d}"].spec.node_name for i in range(4))
    assert all(gated(by_gang[f"g1-w{i:03d}"]) for i in range(4))

    again = ungate(cluster, gang_namespace)
    assert "released" not in again.stdout.replace("left gated", ""), "nothing more fits"

    forced = ungate(cluster, gang_namespace, "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"forced {gang_namespace}/g1: 4 of 4 gated members" in forced.stdout
    assert "warning: --force" in forced.stderr and "not all-or-nothing" in forced.stderr
    assert count_gated(cluster, gang_namespace) == 0


def test_ungate_pins_a_mixed_gang_as_the_controller_would_and_it_binds_whole(
    cluster: Any, gang_namespace: str, request: pytest.FixtureRequest
) -> None:
    """8 + 4 + 4 GPUs on two 8-GPU nodes, released by `ungate` with gangkeeper scaled
    to zero. Unpinned, kube-scheduler's spreading puts the two 4-GPU members on both
    nodes and the 8-GPU one never binds (issue 12; before, `ungate` lifted the gates
    unpinned): each member now carries the controller's pin, and the gang binds whole."""
    pool, nodes = cordoned_pool(cluster, "ungate-mix", 2, 8)
    for name, gpus in (("big", 8), ("small-0", 4), ("small-1", 4)):
        cluster.core.create_namespaced_pod(
            gang_namespace, gang_pod(name, pool, gpus=gpus, gang="mix", min_member=3))
    cluster.wait_for(lambda: count_gated(cluster, gang_namespace) == 3, timeout=60,
                     message="the gang gated")
    request.getfixturevalue("scaled_to_zero")
    uncordon(cluster, nodes)
    done = ungate(cluster, gang_namespace)
    assert done.returncode == 0, done.stderr
    assert f"released {gang_namespace}/mix: 3 of 3 gated members (fits now)" in done.stdout
    found = {p.metadata.name: p for p in pods(cluster, gang_namespace)}
    pins = {name: pinned_node(p) for name, p in found.items()}
    assert pins["small-0"] == pins["small-1"] != pins["big"], pins
    assert {pins["big"], pins["small-0"]} == set(nodes), pins
    cluster.wait_for(
        lambda: all(p.spec.node_name for p in pods(cluster, gang_namespace)),
        timeout=60, message="the gang bound whole, with no controller running",
    )
