"""The seed story with real TrainJob pods, and the demand gangkeeper computes for a
TrainJob at admission against what the pods Trainer creates really request.

The chain is the one users run: TrainJob on `torch-distributed` → the real Trainer
v2.2.0 (JobSet) → the real JobSet controller (Jobs) → the Job controller (pods) →
gangkeeper (gate backend) keys and gates each pod at creation → kube-scheduler.
8 workers of 1 GPU on 8 GPUs of which 3 are taken: none binds; once the 3 are freed,
all 8 bind together and the TrainJob completes.

The demand is read where admission computes it: `gangkeeper check -o json` runs the
validating webhook's policy (`validate_object`, the TrainJob recogniser of
`policies/recognizers/trainjob.py`) on the TrainJob and its runtime as the cluster
serves it. Trainer v2.2.0 applies `resourcesPerNode` by *replacing* the `node`
container's resources (`pkg/runtime/framework/plugins/jobset/builder.go`, the
`WithResources(requirements)` in `Build`; the PodSet Coscheduling sizes its PodGroup
from is replaced the same way in `pkg/runtime/core/trainingruntime.go`). A runtime
whose `node` container asks for a MIG slice of its own tells the rules apart: under
v2.2.0 the pods ask for the TrainJob's GPUs only, and so must gangkeeper's demand.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from builders.cluster import GPU, POOL_LABEL, unique
from builders.controllers import (
    condition,
    is_bound,
    is_gated,
    pods_of,
    recording,
    run_blocker,
    wait_for_pods,
)
from builders.trainer import (
    create_runtime,
    create_trainjob,
    namespaced_runtime,
    needs_trainer,
    pod_spec_of,
    read_trainjob,
    selector,
    shipped_runtime,
    trainjob,
)

from gangkeeper.policies.quantity import gpu_count
from gangkeeper.policies.settings.config import Config

#: Long enough for kube-scheduler to have bound any pod it could.
SETTLE_SECONDS = 3.0
MIG = "nvidia.com/mig-1g.10gb"


def admission_demand(cluster: Any, tmp_path: Path, *docs: dict[str, Any]) -> list[dict[str, Any]]:
    """The TrainJob records of `gangkeeper check -o json` of `docs` (the runtime
    with them) against the cluster's nodes."""
    files = []
    for i, doc in enumerate(docs):
        path = tmp_path / f"doc-{i}.json"
        path.write_text(json.dumps(doc))
        files += ["-f", str(path)]
    done = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "check", *files,
         "--kubeconfig", cluster.kubeconfig, "-o", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    records: list[dict[str, Any]] = json.loads(done.stdout)
    return [r for r in records if r["kind"] == "TrainJob"]


def requested_gpus(pods: list[Any]) -> dict[str, int]:
    """What the pods the API server stored ask for, per GPU resource, summed."""
    config = Config()
    total: dict[str, int] = {}
    for pod in pods:
        for container in pod.spec.containers:
            for name, amount in (container.resources.requests or {}).items():
                if config.is_gpu_resource(name):
                    total[name] = total.get(name, 0) + gpu_count(amount, name)
    return total


def test_seed_story_with_real_trainjob_pods_none_bound_on_five_free_gpus_then_all_eight(
    cluster: Any, gang_namespace: str, plain_namespace: str, tmp_path: Path
) -> None:
    needs_trainer(cluster)
    pool = unique("trainer-seed")
    cluster.create_gpu_nodes(pool, 2, 4, labels={POOL_LABEL: pool})  # 8 GPUs
    blocker = run_blocker(cluster, plain_namespace, pool, 3)  # 5 free
    name = unique("llama")
    body = trainjob(name, gang_namespace, pool, runtime="torch-distributed", nodes=8, gpus=1)

    [record] = admission_demand(cluster, tmp_path, shipped_runtime(cluster, "torch-distributed"),
                                body)
    assert (record["gang"], record["minMember"], record["verdict"]) == (name, 8, "admit"), record

    with recording(cluster, gang_namespace, selector(name)) as seen:
        create_trainjob(cluster, body)
        workers = wait_for_pods(cluster, gang_namespace, selector(name), 8,
                                what="created by Trainer → JobSet → Job")
        time.sleep(SETTLE_SECONDS)
        workers = pods_of(cluster, gang_namespace, selector(name))
        assert [p.metadata.name for p in workers if is_bound(p)] == [], (
            "with 5 of 8 GPUs free no worker may bind"
        )
        assert all(is_gated(p) for p in workers)
        gated = seen.gated_at_creation()
        assert len(gated) == 8 and all(gated.values()), gated

        freed = time.monotonic()
        cluster.core.delete_namespaced_pod(blocker, plain_namespace, grace_period_seconds=0)
        workers = wait_for_pods(cluster, gang_namespace, selector(name), 8, where=is_bound,
                                timeout=60, what="bound")
        took = time.monotonic() - freed
    assert took <= 30.0, f"all 8 bound {took:.1f}s after the GPUs were freed"
    assert len({p.spec.node_name for p in workers}) == 2
    assert requested_gpus(workers) == record["demand"] == {GPU: 8}
    cluster.wait_for(lambda: condition(read_trainjob(cluster, gang_namespace, name), "Complete"),
                     timeout=120, message=f"TrainJob {name} Complete")


def test_admission_demand_of_a_trainjob_is_what_trainer_v2_2_0_makes_the_pods_request(
    cluster: Any, gang_namespace: str, tmp_path: Path
) -> None:
    """resourcesPerNode replaces the runtime's `node` resources (v2.2.0): the MIG slice
    the runtime asks for is gone from the pods, and from gangkeeper's demand."""
    needs_trainer(cluster)
    pool = unique("trainer-demand")
    cluster.create_gpu_nodes(pool, 2, 2, labels={POOL_LABEL: pool})
    runtime = namespaced_runtime(cluster, "torch-distributed", unique("torch-mig"),
                                 gang_namespace)
    [node] = pod_spec_of(runtime, "node")["containers"]
    node["resources"] = {"requests": {MIG: "1", "cpu": "500m"}, "limits": {MIG: "1"}}
    create_runtime(cluster, runtime)
    name = unique("replace")
    body = trainjob(name, gang_namespace, pool, runtime=runtime["metadata"]["name"],
                    runtime_kind="TrainingRuntime", nodes=2,
                    resources={"limits": {GPU: "2"}})

    [record] = admission_demand(cluster, tmp_path, runtime, body)
    create_trainjob(cluster, body)
    pods = wait_for_pods(cluster, gang_namespace, selector(name), 2, where=is_bound,
                         what="bound")

    for pod in pods:
        [container] = [c for c in pod.spec.containers if c.name == "node"]
        assert container.resources.limits == {GPU: "2"}, container.resources
        assert MIG not in (container.resources.requests or {}), container.resources
    assert (record["verdict"], record["minMember"]) == ("admit", 2), record
    assert requested_gpus(pods) == record["demand"] == {GPU: 4}
