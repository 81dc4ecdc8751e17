"""The sandbox runs gangkeeper as the shipped Deployments do: admission and the gang
controller in two processes that share nothing but the API server.

Checked on the running sandbox: two live processes with different PIDs; the Lease is
held by the controller's process, never admission's; admission's /metrics has no
controller series while the controller's reports it leads; the controller answers no
AdmissionReview (404), so a webhook call can never be planned beside a release; and a
gang pod the API server sends to admission is still gated and then released by the
other process.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, unique
from builders.faults import LEASE_SECONDS, identity_of, lease_holder, metrics, tls

from gangkeeper.webhook.sandbox.faults import Faults
from gangkeeper.webhook.sandbox.sandbox import CONTROLLER_PROCESS

pytestmark = pytest.mark.e2e

LEADER = "gangkeeper_controller_leader"
UNGATED = "gangkeeper_gang_ungated_pods_total"


def _post_status(url: str, context: ssl.SSLContext) -> int:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "split", "operation": "CREATE", "object": {}}}
    request = urllib.request.Request(
        url, data=json.dumps(review).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_admission_and_the_controller_run_as_two_processes(cluster: Any) -> None:
    sandbox = cluster.sandbox
    if sandbox is None:
        pytest.skip("the processes are the sandbox's")
    if sandbox.controller_process != CONTROLLER_PROCESS:
        pytest.skip("this sandbox runs gangkeeper in one process (--single-process)")
    faults = Faults(sandbox)
    assert faults.pid("gangkeeper") != faults.pid(CONTROLLER_PROCESS)
    controller = identity_of(faults, CONTROLLER_PROCESS)
    cluster.wait_for(lambda: lease_holder(cluster) == controller, timeout=LEASE_SECONDS + 30,
                     message="the controller's process holds the Lease")
    admission_url = str(sandbox.state()["gangkeeper_url"])
    assert LEADER not in metrics(cluster, admission_url), "admission runs no controller"
    assert metrics(cluster, sandbox.controller_url).get(LEADER) == 1.0
    assert _post_status(f"{sandbox.controller_url}/mutate", tls(cluster)) == 404


def test_a_gang_admitted_by_one_process_is_released_by_the_other(
    cluster: Any, gang_namespace: str
) -> None:
    if cluster.sandbox is None or cluster.sandbox.controller_process != CONTROLLER_PROCESS:
        pytest.skip("needs the sandbox's two processes")
    pool = unique("split")
    cluster.create_gpu_nodes(pool, 1, 8, labels={POOL_LABEL: pool})
    name = unique("split")
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": gang_namespace},
        "spec": {
            "completionMode": "Indexed", "completions": 2, "parallelism": 2,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {POOL_LABEL: pool},
                    "containers": [{
                        "name": "train", "image": "registry.invalid/train",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }],
                }
            },
        },
    }  # fmt: skip
    before = metrics(cluster, cluster.sandbox.controller_url).get(
        UNGATED, 0.0)
    cluster.batch.create_namespaced_job(gang_namespace, job)
    selector = f"batch.kubernetes.io/job-name={name}"

    def bound() -> bool:
        pods = cluster.core.list_namespaced_pod(gang_namespace, label_selector=selector).items
        return len(pods) == 2 and all(p.spec.node_name for p in pods)

    cluster.wait_for(bound, timeout=90, message="both members released and bound")
    after = metrics(cluster, cluster.sandbox.controller_url).get(
        UNGATED, 0.0)
    assert after - before >= 2, "the controller's process lifted the gates"
