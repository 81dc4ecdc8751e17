"""Latency gangkeeper adds to pod creation, through the real kube-apiserver.

Training pods (one GPU each, gang annotations, 8 members per gang) are created one at
a time, alternating between a namespace that did not opt in (the API server never
calls gangkeeper: the baseline) and an opted-in one (mutating + validating webhook on
every create). Interleaving puts both under the same background load. Pods select a
declared GPU pool with no nodes, so they are admitted but never placed: the figure is
creation alone. Reported: p50/p99 of the create call per namespace and the difference.
Target: ≤ 5 ms added at p50, ≤ 15 ms at p99.

Pure part: `latency_rows` over two samples. Live part: creates pods only in the two
benchmark namespaces of the cluster it is given, and deletes them afterwards.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench.scheduling import percentile
from gangkeeper.policies.names import GANG_NAME_ANNOTATION, MIN_MEMBER_ANNOTATION

if TYPE_CHECKING:
    from bench.cluster import BenchCluster

PLAIN = "bench-latency-plain"
GANG = "bench-latency-gang"
GANG_SIZE = 8
WARMUP = 20
TARGET_P50_MS = 5.0
TARGET_P99_MS = 15.0


def training_pod(index: int) -> dict[str, Any]:
    """Worker `index % 8` of gang `index // 8`: what a PyTorch worker pod looks like."""
    from bench.cluster import LATENCY_POOL, POOL_LABEL

    gang = f"lat-{index // GANG_SIZE:04d}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{gang}-{index % GANG_SIZE}",
            "labels": {"app": "trainer", "bench.gangkeeper.io/latency": "true"},
            "annotations": {
                GANG_NAME_ANNOTATION: gang,
                MIN_MEMBER_ANNOTATION: str(GANG_SIZE),
            },
        },
        "spec": {
            "nodeSelector": {POOL_LABEL: LATENCY_POOL},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pytorch",
                    "image": "registry.invalid/pytorch-train:2.5",
                    "command": ["torchrun", "--nproc-per-node=1", "train.py"],
                    "env": [
                        {"name": "MASTER_ADDR", "value": f"{gang}-0"},
                        {"name": "MASTER_PORT", "value": "29500"},
                        {"name": "WORLD_SIZE", "value": str(GANG_SIZE)},
                        {"name": "RANK", "value": str(index % GANG_SIZE)},
                    ],
                    "resources": {
                        "requests": {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"},
                        "limits": {"memory": "32Gi", "nvidia.com/gpu": "1"},
                    },
                }
            ],
        },
    }


def latency_rows(plain_ms: Sequence[float], gang_ms: Sequence[float]) -> list[dict[str, Any]]:
    """Per-namespace p50/p99 and the difference (gangkeeper - plain) with the targets."""
    if not plain_ms or not gang_ms:
        raise ValueError("latency_rows needs samples from both namespaces")
    p50 = (percentile(plain_ms, 50), percentile(gang_ms, 50))
    p99 = (percentile(plain_ms, 99), percentile(gang_ms, 99))
    added50, added99 = p50[1] - p50[0], p99[1] - p99[0]
    return [
        {"namespace": "not opted in (baseline)", "pods": len(plain_ms),
         "p50_ms": round(p50[0], 2), "p99_ms": round(p99[0], 2)},
        {"namespace": "opted in (gangkeeper)", "pods": len(gang_ms),
         "p50_ms": round(p50[1], 2), "p99_ms": round(p99[1], 2)},
        {"namespace": "added by gangkeeper", "pods": None,
         "p50_ms": round(added50, 2), "p99_ms": round(added99, 2),
         "p50_ratio": round(p50[1] / p50[0], 2) if p50[0] else None,
         "p99_ratio": round(p99[1] / p99[0], 2) if p99[0] else None,
         "target": f"≤ {TARGET_P50_MS:g} ms p50, ≤ {TARGET_P99_MS:g} ms p99",
         "met": added50 <= TARGET_P50_MS and added99 <= TARGET_P99_MS},
    ]  # fmt: skip


def measure(cluster: BenchCluster, pods: int) -> tuple[list[float], list[float]]:
    """Create `pods` pods in each namespace, alternating; the create-call times in ms."""
    plain: list[float] = []
    gang: list[float] = []
    errors: list[str] = []
    for i in range(pods + WARMUP):
        # Alternate which namespace goes first, so neither always follows the other.
        order = [(PLAIN, plain), (GANG, gang)] if i % 2 == 0 else [(GANG, gang), (PLAIN, plain)]
        for namespace, sample in order:
            body = training_pod(i)
            data = json.dumps(body).encode()
            path = f"/api/v1/namespaces/{namespace}/pods"
            # The raw client: a few microseconds of our own CPU per call, so the
            # figure is the API server's (and its webhooks') time, not the client's.
            started = time.perf_counter()
            status, answer = cluster.raw.request("POST", path, data)
            elapsed = (time.perf_counter() - started) * 1000
            if status != 201:
                errors.append(
                    f"{namespace}/{body['metadata']['name']}: HTTP {status} {answer[:200]!r}"
                )
                continue
            if i >= WARMUP:  # the first calls pay for connections and TLS handshakes
                sample.append(elapsed)
    if errors:
        raise RuntimeError(f"{len(errors)} pod creates failed; first: {errors[0][:300]}")
    return plain, gang


def run(quick: bool, cluster: BenchCluster | None = None) -> list[dict[str, Any]]:
    from bench.cluster import open_cluster

    if cluster is None:
        with open_cluster(quick=quick) as own:
            return run(quick, own)
    pods = 100 if quick else 1000
    cluster.log(f"create_latency: {pods} pods per namespace, interleaved")
    try:
        plain, gang = measure(cluster, pods)
    finally:
        for namespace in (PLAIN, GANG):
            cluster.clear_pods(namespace)
    return latency_rows(plain, gang)


if __name__ == "__main__":  # pragma: no cover - manual entry point
    import sys

    from bench.report import print_rows

    print_rows("create_latency", run("--quick" in sys.argv[1:]))
