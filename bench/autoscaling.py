"""Gangs on a pool at zero nodes: creation → all members bound, with Karpenter on kwok.

A sandbox of its own (kwok, Karpenter's kwok provider v1.15.0, gangkeeper with
declared pools; `deploy/sandbox/build.sh karpenter`). For each gang size (8, 32 and
128 GPUs, members of 8 GPUs), two Indexed Jobs run one after the other:

- **baseline**: the same gang on kwok nodes that exist already (created beforehand,
  Ready): gangkeeper releases it at once, kube-scheduler binds it;
- **autoscaled**: the gang on a NodePool with no node: gangkeeper's placeholders,
  Karpenter's NodeClaims, kwok's Ready nodes, then the release.

Figures per size: seconds from the Job's creation to its last member bound (both
runs), their ratio (the cost of scaling from zero, measured in the same run), the nodes
Karpenter created against the minimum the gang needs (ceil(GPUs / 8): no waste from
placeholders), and the placeholders left after the release (0).

May touch: its temporary sandbox directory, the processes the sandbox starts and the
objects it creates in that sandbox. Nothing else.
"""

from __future__ import annotations

import math
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from gangkeeper.policies.names import PLACEHOLDER_LABEL

POOL_LABEL = "bench.gangkeeper.io/pool"
GPUS_PER_NODE = 8
NAMESPACE = "bench-autoscaling"


def _config(sizes: tuple[int, ...]) -> dict[str, Any]:
    return {
        "pools": [
            {"name": f"auto-{gpus}", "maxCount": math.ceil(gpus / GPUS_PER_NODE),
             "labels": {POOL_LABEL: f"auto-{gpus}"}, "allocatable": {"nvidia.com/gpu": 8}}
            for gpus in sizes
        ],
        "provisioningTimeoutSeconds": 300,
    }


def _node_pool(pool: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": pool},
        "spec": {
            "limits": {"nvidia.com/gpu": str(gpus)},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "60s"},
            "template": {
                "metadata": {"labels": {POOL_LABEL: pool}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                     "name": "default"},
                    "expireAfter": "Never",
                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                      "values": ["on-demand"]}],
                },
            },
        },
    }


def _job(name: str, pool: str, members: int) -> dict[str, Any]:
    gpu = {"nvidia.com/gpu": str(GPUS_PER_NODE)}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "completionMode": "Indexed", "completions": members, "parallelism": members,
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "nodeSelector": {POOL_LABEL: pool},
                "containers": [{"name": "trainer", "image": "registry.invalid/trainer:1",
                                "resources": {"requests": {**gpu, "cpu": "1"}, "limits": gpu}}],
            }},
        },
    }


def _bound_after(core: Any, batch: Any, body: dict[str, Any], members: int) -> float:
    started = time.monotonic()
    batch.create_namespaced_job(NAMESPACE, body)
    selector = f"job-name={body['metadata']['name']}"
    deadline = started + 300
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=selector).items
        if len(pods) == members and all(p.spec.node_name for p in pods):
            return time.monotonic() - started
        time.sleep(0.1)
    raise RuntimeError(f"{body['metadata']['name']}: not all {members} members bound in 300 s")


def run(quick: bool) -> list[dict[str, Any]]:
    from kubernetes import client
    from kubernetes import config as kube_config

    from gangkeeper.webhook.sandbox import Sandbox, create_nodes, gpu_node

    sizes = (8, 32) if quick else (8, 32, 128)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gk-bench-autoscaling-") as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(yaml.safe_dump(_config(sizes)))
        sandbox = Sandbox(Path(tmp) / "sandbox")
        sandbox.up(fleet=None, config=config, components=("kwok", "karpenter"), timeout=300)
        api = kube_config.new_client_from_config(config_file=str(sandbox.kubeconfig))  # type: ignore[no-untyped-call]
        try:
            core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
            namespace: Any = {
                "metadata": {"name": NAMESPACE, "labels": {"gangkeeper.io/enabled": "true"}}
            }
            core.create_namespace(namespace)
            while not core.list_namespaced_service_account(NAMESPACE).items:
                time.sleep(0.2)
            pools = [_node_pool(f"auto-{gpus}", gpus) for gpus in sizes]
            sandbox.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(pools))
            for gpus in sizes:
                members = gpus // GPUS_PER_NODE
                static = [gpu_node(f"static-{gpus}-{i}", GPUS_PER_NODE,
                                   labels={POOL_LABEL: f"static-{gpus}"}) for i in range(members)]
                create_nodes(core, static)
                time.sleep(2)  # kwok makes them Ready; gangkeeper's cache has them
                baseline = _bound_after(core, batch, _job(f"static-{gpus}", f"static-{gpus}",
                                                          members), members)
                pool = f"auto-{gpus}"
                autoscaled = _bound_after(core, batch, _job(pool, pool, members), members)
                nodes = core.list_node(label_selector=f"{POOL_LABEL}={pool}").items
                time.sleep(1)
                left = core.list_namespaced_pod(NAMESPACE, label_selector=PLACEHOLDER_LABEL).items
                rows.append({
                    "gang_gpus": gpus,
                    "members": members,
                    "baseline_existing_nodes_s": round(baseline, 2),
                    "autoscaled_from_zero_s": round(autoscaled, 2),
                    "autoscaled_vs_baseline": round(autoscaled / baseline, 1) if baseline else None,
                    "karpenter_nodes": len(nodes),
                    "minimum_nodes": math.ceil(gpus / GPUS_PER_NODE),
                    "placeholders_left": len(left),
                })
        finally:
            api.close()
            sandbox.down()
    return rows


if __name__ == "__main__":  # pragma: no cover - manual entry point
    import sys

    from bench.report import print_rows

    print_rows("autoscaling", run("--quick" in sys.argv[1:]))
