"""Latency gangkeeper adds to pod creation, through the real kube-apiserver.

Training pods (one GPU each, gang annotations, 8 members per gang) are created one at
a time, in turn in three namespaces: one that did not opt in (the API server calls no
webhook: the baseline), one whose pods go through a no-op webhook pair (a mutating and
a validating webhook like gangkeeper's — same server, TLS, match conditions — whose
endpoint `/noop` allows without looking: the floor any webhook pair pays on this
machine), and an opted-in one (gangkeeper's own pair). Interleaving puts all three
under the same background load. Pods select a declared GPU pool with no nodes, so they
are admitted but never placed: the figure is creation alone. Reported: p50/p99 of the
create call per namespace, what gangkeeper adds over the baseline, and what it adds
over the no-op pair (what is gangkeeper's own). Target: ≤ 5 ms added at p50, ≤ 15 ms
at p99.

Pure part: `latency_rows` over the samples, `noop_pair` over the installed webhook
configurations. Live part: creates the no-op pair (removed afterwards) and pods only in
the three benchmark namespaces of the cluster it is given, and deletes them afterwards.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bench.scheduling import percentile
from gangkeeper.policies.names import GANG_NAME_ANNOTATION, MIN_MEMBER_ANNOTATION

if TYPE_CHECKING:
    from bench.cluster import BenchCluster

PLAIN = "bench-latency-plain"
GANG = "bench-latency-gang"
NOOP = "bench-latency-noop"
#: The label that selects NOOP for the no-op pair.
NOOP_LABEL = "bench.gangkeeper.io/noop-webhooks"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
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


def noop_pair(configuration: Mapping[str, Any]) -> dict[str, Any]:
    """gangkeeper's webhook configuration as a no-op twin: every webhook renamed, sent
    to `/noop` on the same server, and selecting only namespaces labelled NOOP_LABEL;
    rules, match conditions, object selector, timeouts and failure policy unchanged."""
    meta = configuration["metadata"]
    webhooks = []
    for hook in configuration.get("webhooks") or []:
        client = dict(hook["clientConfig"])
        if "url" in client:
            base, _, _ = str(client["url"]).rpartition("/")
            client["url"] = f"{base}/noop"
        else:
            client["service"] = {**client["service"], "path": "/noop"}
        webhooks.append({
            **hook,
            "name": f"noop.{hook['name']}",
            "clientConfig": client,
            "namespaceSelector": {"matchLabels": {NOOP_LABEL: "true"}},
        })
    return {
        "apiVersion": configuration.get("apiVersion", "admissionregistration.k8s.io/v1"),
        "kind": configuration["kind"],
        "metadata": {"name": f"{meta['name']}-noop"},
        "webhooks": webhooks,
    }


def _install_noop_pair(cluster: BenchCluster) -> list[str]:
    """Create the no-op twins of gangkeeper's two configurations; their paths."""
    from gangkeeper.policies.names import (
        MUTATING_WEBHOOK_CONFIGURATION,
        VALIDATING_WEBHOOK_CONFIGURATION,
    )

    created = []
    for kind, name in (("mutatingwebhookconfigurations", MUTATING_WEBHOOK_CONFIGURATION),
                       ("validatingwebhookconfigurations", VALIDATING_WEBHOOK_CONFIGURATION)):
        status, body = cluster.raw.request("GET", f"{ADMISSION}/{kind}/{name}")
        if status != 200:
            raise RuntimeError(f"reading {kind}/{name}: HTTP {status} {body[:200]!r}")
        twin = noop_pair(json.loads(body))
        status, body = cluster.raw.request("POST", f"{ADMISSION}/{kind}",
                                           json.dumps(twin).encode())
        if status != 201:
            raise RuntimeError(f"creating the no-op {kind}: HTTP {status} {body[:200]!r}")
        created.append(f"{ADMISSION}/{kind}/{twin['metadata']['name']}")
    patch = json.dumps({"metadata": {"labels": {NOOP_LABEL: "true"}}}).encode()
    status, body = cluster.raw.request("PATCH", f"/api/v1/namespaces/{NOOP}", patch,
                                       content_type="application/merge-patch+json")
    if status != 200:
        raise RuntimeError(f"labelling {NOOP}: HTTP {status} {body[:200]!r}")
    return created


def latency_rows(
    plain_ms: Sequence[float], gang_ms: Sequence[float], noop_ms: Sequence[float] = ()
) -> list[dict[str, Any]]:
    """Per-namespace p50/p99 and the difference (gangkeeper - plain) with the targets;
    with `noop_ms`, also the no-op pair's row and what gangkeeper adds over it."""
    if not plain_ms or not gang_ms:
        raise ValueError("latency_rows needs samples from both namespaces")
    p50 = (percentile(plain_ms, 50), percentile(gang_ms, 50))
    p99 = (percentile(plain_ms, 99), percentile(gang_ms, 99))
    added50, added99 = p50[1] - p50[0], p99[1] - p99[0]
    rows: list[dict[str, Any]] = [
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
    if noop_ms:
        floor50, floor99 = percentile(noop_ms, 50), percentile(noop_ms, 99)
        rows[1:1] = [{"namespace": "no-op webhook pair (floor)", "pods": len(noop_ms),
                      "p50_ms": round(floor50, 2), "p99_ms": round(floor99, 2)}]
        rows.append({"namespace": "added by gangkeeper over the no-op pair", "pods": None,
                     "p50_ms": round(p50[1] - floor50, 2), "p99_ms": round(p99[1] - floor99, 2),
                     "p50_ratio": round(p50[1] / floor50, 2) if floor50 else None,
                     "p99_ratio": round(p99[1] / floor99, 2) if floor99 else None})
    return rows


def measure(cluster: BenchCluster, pods: int) -> dict[str, list[float]]:
    """Create `pods` pods in each namespace, in turn; the create-call times in ms."""
    samples: dict[str, list[float]] = {PLAIN: [], NOOP: [], GANG: []}
    names = list(samples)
    errors: list[str] = []
    for i in range(pods + WARMUP):
        # Rotate which namespace goes first, so none always follows another.
        shift = i % len(names)
        for namespace in names[shift:] + names[:shift]:
            sample = samples[namespace]
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
    return samples


def run(quick: bool, cluster: BenchCluster | None = None) -> list[dict[str, Any]]:
    from bench.cluster import open_cluster

    if cluster is None:
        with open_cluster(quick=quick) as own:
            return run(quick, own)
    pods = 100 if quick else 1000
    cluster.log(f"create_latency: {pods} pods per namespace, interleaved")
    created = _install_noop_pair(cluster)
    try:
        samples = measure(cluster, pods)
    finally:
        for path in created:
            cluster.raw.request("DELETE", path)
        for namespace in (PLAIN, NOOP, GANG):
            cluster.clear_pods(namespace)
    return latency_rows(samples[PLAIN], samples[GANG], samples[NOOP])


if __name__ == "__main__":  # pragma: no cover - manual entry point
    import sys

    from bench.report import print_rows

    print_rows("create_latency", run("--quick" in sys.argv[1:]))
