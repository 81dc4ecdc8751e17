"""Policy-core benchmark: one pod decision and one object validation vs cluster size.

`python -m bench.policy [--quick]` builds a `Capacity` of 10, 1,000, 5,000 and 50,000
GPU nodes (a realistic mix of 16 shapes: 4 GPU node types x 2 zones x tainted or not,
plus per-node hostname labels and a third of the nodes partly used by bound pods), then
times with `time.perf_counter_ns`, pinned to one core:

- **pod decision**: `decide_pod` on a worker pod of a 3-member PyTorchJob (8 GPUs per
  member, nodeSelector + toleration; it fits the 10-node cluster too, so every size
  takes the same path): recognise through the owner lookup, feasibility
  on the "ever" and "free" views, and the mutation plan applied to a copy of the pod;
- **object validation**: `validate_object` on the PyTorchJob itself.

Each figure is the median and p99 over many iterations after a warm-up; the 10-node
run of the same case, measured in the same process, is the baseline (`vs_10_nodes`).
Target: median ≤ 100 µs for a pod decision at 5,000 nodes, flat as nodes grow.

`run(quick)` returns the rows for `python -m bench`; the module prints a Markdown table.
Touches nothing outside this process (no files, no network).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from gangkeeper.policies import Capacity, Config, KubeObject, decide_pod, validate_object
from gangkeeper.policies.admission.decision import Memos
from gangkeeper.webhook.sandbox.nodes import gpu_node

SIZES = (10, 1_000, 5_000, 50_000)
GPU = "nvidia.com/gpu"
#: (instance type, GPUs per node, pool label)
NODE_TYPES = (
    ("p5.48xlarge", 8, "h100"),
    ("p4de.24xlarge", 8, "a100"),
    ("g6.12xlarge", 4, "l4"),
    ("g5.xlarge", 1, "a10g"),
)
ZONES = ("us-east-1a", "us-east-1b")


def make_node(index: int) -> dict[str, Any]:
    instance, gpus, pool = NODE_TYPES[index % len(NODE_TYPES)]
    zone = ZONES[(index // len(NODE_TYPES)) % len(ZONES)]
    tainted = (index // (len(NODE_TYPES) * len(ZONES))) % 2 == 1
    name = f"{pool}-{zone[-2:]}-{index:05d}"
    labels = {
        "node.kubernetes.io/instance-type": instance,
        "topology.kubernetes.io/zone": zone,
        "gangkeeper.io/pool": pool,
    }
    taints = [{"key": "gangkeeper.io/reserved", "value": "train", "effect": "NoSchedule"}]
    return gpu_node(name, gpus, resource=GPU, labels=labels, taints=taints if tainted else ())


def make_capacity(nodes: int, config: Config) -> Capacity:
    capacity = Capacity(config)
    for index in range(nodes):
        node = make_node(index)
        capacity.upsert_node(node)
        gpus = int(node["status"]["allocatable"][GPU])
        # A third of the nodes run something: free capacity has several groups per shape.
        if index % 3 == 1:
            capacity.add_pod(f"busy-{index}", node["metadata"]["name"], {GPU: 1 + index % gpus})
    return capacity


def template(gpus: int) -> dict[str, Any]:
    return {
        "spec": {
            "nodeSelector": {"gangkeeper.io/pool": "h100"},
            "tolerations": [{"key": "gangkeeper.io/reserved", "operator": "Exists"}],
            "containers": [
                {
                    "name": "pytorch",
                    "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                    "resources": {
                        "requests": {"cpu": "90", "memory": "900Gi"},
                        "limits": {GPU: str(gpus)},
                    },
                }
            ],
        }
    }


JOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "llama-ft", "namespace": "team-a", "uid": "7d6c6b1e-job"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template(8)},
            "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template(8)},
        }
    },
}

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "llama-ft-worker-3",
        "namespace": "team-a",
        "labels": {
            "training.kubeflow.org/job-name": "llama-ft",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "3",
        },
        "ownerReferences": [
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "name": "llama-ft",
                "uid": "7d6c6b1e-job",
                "controller": True,
            }
        ],
    },
    "spec": template(8)["spec"],
}


def lookup(api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
    if (api_version, kind, namespace, name) == (
        "kubeflow.org/v1",
        "PyTorchJob",
        "team-a",
        "llama-ft",
    ):
        return JOB
    return None


@contextlib.contextmanager
def one_core() -> Iterator[str]:
    """Pin this process to one CPU while measuring (Linux); yields which."""
    if not hasattr(os, "sched_getaffinity"):
        yield "unpinned"
        return
    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield f"cpu {cpu}"
    finally:
        os.sched_setaffinity(0, before)


def measure(call: Callable[[], object], iterations: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        call()
    samples = []
    cpu_samples = []
    gc.disable()  # a collection in one sample is noise, not the decision's cost
    try:
        for _ in range(iterations):
            cpu = time.thread_time_ns()
            start = time.perf_counter_ns()
            call()
            samples.append(time.perf_counter_ns() - start)
            cpu_samples.append(time.thread_time_ns() - cpu)
    finally:
        gc.enable()
    samples.sort()
    return {
        "median_us": statistics.median(samples) / 1000,
        "p99_us": samples[min(len(samples) - 1, int(len(samples) * 0.99))] / 1000,
        # CPU time of this thread: on a shared machine wall time also counts the
        # time other processes held the core.
        "cpu_median_us": statistics.median(cpu_samples) / 1000,
    }


def run(quick: bool) -> list[dict[str, Any]]:
    """Rows for the report: one per (case, cluster size)."""
    config = Config()
    # What the server remembers between decisions, as `gangkeeper serve` has it.
    memos = Memos()
    iterations, warmup = (300, 30) if quick else (3_000, 200)
    rows: list[dict[str, Any]] = []
    baseline: dict[str, float] = {}
    with one_core() as pinned:
        for nodes in SIZES:
            capacity = make_capacity(nodes, config)
            decision = decide_pod(
                POD, namespace="team-a", capacity=capacity, lookup=lookup, config=config,
                memos=memos,
            )
            # A benchmark of the wrong answer is worthless: the pod must be recognised,
            # admitted and patched at every size.
            assert decision.membership is not None and decision.patched is not None, decision
            [validated] = validate_object(
                JOB, capacity=capacity, lookup=lookup, config=config, memos=memos
            )
            assert validated.verdict.allowed and validated.gang.size == 3, validated
            cases: dict[str, Callable[[], object]] = {
                "pod decision": functools.partial(
                    decide_pod,
                    POD,
                    namespace="team-a",
                    capacity=capacity,
                    lookup=lookup,
                    config=config,
                    memos=memos,
                ),
                "object validation": functools.partial(
                    validate_object, JOB, capacity=capacity, lookup=lookup, config=config,
                    memos=memos,
                ),
            }
            for case, call in cases.items():
                figures = measure(call, iterations, warmup)
                baseline.setdefault(case, figures["median_us"])
                rows.append(
                    {
                        "case": case,
                        "nodes": nodes,
                        "shapes": capacity.shape_count,
                        "median_us": round(figures["median_us"], 1),
                        "p99_us": round(figures["p99_us"], 1),
                        "cpu_median_us": round(figures["cpu_median_us"], 1),
                        "vs_10_nodes": round(figures["median_us"] / baseline[case], 2),
                        "iterations": iterations,
                        "pinned": pinned,
                    }
                )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| case | nodes | shapes | median µs | p99 µs | CPU median µs | median vs 10 nodes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row['case']} | {row['nodes']:,} | {row['shapes']} | {row['median_us']:.1f} "
            f"| {row['p99_us']:.1f} | {row['cpu_median_us']:.1f} | {row['vs_10_nodes']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.policy", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations (≈ 10 s)")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(markdown(rows))
    print(
        f"\n`python -m bench.policy{' --quick' if args.quick else ''}`, "
        f"{rows[0]['pinned']}, load average {load:.1f} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
