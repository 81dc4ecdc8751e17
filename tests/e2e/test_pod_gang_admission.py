"""A pod-based gang summed over its members on a real control plane (issue 13).

Fleet: two 8-GPU nodes. Five bare pods of one gang (`gangkeeper.io/gang-name` +
`min-member: 5`), 3 GPUs each, are created one by one with kubectl:
- each of the first four is admitted (gated), and the API server passes on
  gangkeeper's admission warning: five members like the ones seen (3 GPUs each) cannot
  be packed, at most 4 fit;
- once gangkeeper's cache holds the four (its watch of gang pods), the fifth is refused
  with the numbers: all five seen, 15 GPUs, only 4 such members fit;
- the four wait gated, and a GangIncomplete Event and `gangkeeper status` say why.
A second controller in this process (own Lease, 2-second stuck timeout) writes the
Events so the test does not wait the default 5 minutes. No API server mocks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import yaml
from builders.cluster import POOL_LABEL, gang_pod, unique
from builders.events import events_in

from gangkeeper.policies.names import GATE
from gangkeeper.webhook.controller import GangController

WARNING = (
    "5 members like the {seen} seen (3 nvidia.com/gpu each) cannot be packed, at most 4 fit"
)


def create(cluster: Any, namespace: str, pod: dict[str, Any], *dry_run: str) -> Any:
    return cluster.kubectl(
        "create", "-n", namespace, *dry_run, "-f", "-", input=yaml.safe_dump(pod), check=False
    )


def test_five_3_gpu_pods_of_one_gang_four_admitted_with_a_warning_the_fifth_refused(
    cluster: Any, gang_namespace: str, own_controller: GangController
) -> None:
    pool = unique("podgang")
    cluster.create_gpu_nodes(pool, 2, 8, labels={POOL_LABEL: pool})
    pods = [gang_pod(f"m{i}", pool, gpus=3, gang="three-gpu", min_member=5) for i in range(5)]

    for seen, pod in enumerate(pods[:4], start=1):
        done = create(cluster, gang_namespace, pod)
        assert done.returncode == 0, done.stderr
        # kubectl prints admission warnings on stderr: "Warning: ...".
        assert WARNING.format(seen=seen) in done.stderr, done.stderr
        # The next pod is decided with this one among its siblings: wait until
        # gangkeeper's watch has it (a dry-run asks the same webhooks, writes nothing).
        if seen < 4:
            cluster.wait_for(
                lambda s=seen: WARNING.format(seen=s + 1)
                in create(cluster, gang_namespace, pods[s], "--dry-run=server").stderr,
                timeout=30,
                message=f"gangkeeper's cache holding {seen} members",
            )

    def fifth_refused() -> Any:
        done = create(cluster, gang_namespace, pods[4], "--dry-run=server")
        return done if done.returncode != 0 else None

    cluster.wait_for(fifth_refused, timeout=30, message="gangkeeper's cache holding four")
    refused = create(cluster, gang_namespace, pods[4])
    assert refused.returncode != 0
    assert "denied the request" in refused.stderr
    assert "needs 5 members of 3 nvidia.com/gpu" in refused.stderr
    assert "fit only 4" in refused.stderr
    assert "all 5 members seen: 15 nvidia.com/gpu" in refused.stderr

    members = cluster.core.list_namespaced_pod(gang_namespace).items
    assert sorted(p.metadata.name for p in members) == ["m0", "m1", "m2", "m3"]
    assert all(
        any(g.name == GATE for g in p.spec.scheduling_gates or []) and not p.spec.node_name
        for p in members
    )

    def events() -> list[dict[str, Any]]:
        return events_in(cluster.api_client, gang_namespace, "GangIncomplete")

    # Each of the four is told the gang's state with all four present (on a slow machine
    # an earlier Event may have said "3 of 5": the controller reports again when members
    # arrive, and a member created after that report gets one too).
    cluster.wait_for(
        lambda: {e["regarding"]["name"] for e in events() if "4 of 5 members exist" in e["note"]}
        >= {"m0", "m1", "m2", "m3"},
        timeout=30,
        message="GangIncomplete events saying 4 of 5 on the four pods",
    )
    assert all(" of 5 members exist" in e["note"] for e in events())
    status = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "status", "-n", gang_namespace,
         "-o", "json", "--kubeconfig", cluster.kubeconfig],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert status.returncode == 0, status.stderr
    [row] = json.loads(status.stdout)
    assert (row["gang"], row["present"], row["minMember"], row["gated"], row["bound"]) == (
        "three-gpu", 4, 5, 4, 0
    )
    assert (row["state"], row["code"], row["reason"]) == (
        "waiting", "incomplete", "4 of 5 members exist"
    )
