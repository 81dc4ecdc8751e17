"""Release as a placement, measured: the same random gangs released pinned and
unpinned (`namespacePlacement: scheduler`) in the same run, on the sandbox's real
kube-scheduler.

Two equal fleets (4 kwok nodes x 8 `nvidia.com/gpu`), one per namespace. Each round
draws a batch of gangs of mixed member sizes (2, 4 or 8 GPUs) that together fit the
fleet exactly or nearly (so packing matters), creates the same batch in both
namespaces at once as bare annotated pods, and samples the pods every 0.2 s for the
round's window. Per placement it reports gangs ever partly bound (some members bound,
some not, for longer than `PARTIAL_GRACE` — the scheduler binds a whole gang's
members within a fraction of a second), how long (the sampled time during which it was
partly bound: a gang requeued whole holds nothing while it waits gated, and that wait
is not partial), the GPU-seconds their bound members held meanwhile, and the time from
creation to bound whole.

Two kinds of rounds, each way:
- **quiet**: nothing but the gangs (bare annotated pods) on the fleets;
- **competed**: each gang is an Indexed Job (so that a gang with a member stuck on a
  taken node can be requeued: the watchdog suspends and resumes the Job, whose pods
  come back gated and are placed anew), and at the moment the
  gangs are created, pods of no gang (in a namespace that is not opted in, so never
  gated) ask the same fleets for GPUs and keep them for the rest of the round. The
  gangs are drawn to fit beside them, so every gang can bind whole if its members are
  placed well and recovered when a competitor takes a pinned member's node. The issue's
  target: none partly bound longer than `rebindSeconds` + 10 s.

May touch: the sandbox `bench.cluster` starts, its two namespaces and fleets.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.cluster import BENCH_CONFIG, BenchCluster, open_cluster
from gangkeeper.policies.names import GANG_NAME_ANNOTATION, MIN_MEMBER_ANNOTATION

GPU = "nvidia.com/gpu"
NODES, GPUS = 4, 8
PLACEMENTS = {"pinned": "bench-place-pinned", "scheduler": "bench-place-scheduler"}
#: Where the competing pods of no gang live (not opted in: gangkeeper never gates them).
OTHER_NAMESPACE = "bench-place-other"
#: GPUs of the competing pods per fleet in a competed round (of NODES * GPUS).
COMPETITORS = (4, 2, 2)
#: The watchdog's `rebindSeconds` in the benchmark config.
REBIND_SECONDS = float(BENCH_CONFIG["rebindSeconds"])
FLEET_LABEL = "bench.gangkeeper.io/place-fleet"
#: A gang partly bound for less than this is still binding, not stuck.
PARTIAL_GRACE = 1.0


def draw_batch(rng: random.Random, capacity: int) -> list[list[int]]:
    """Gangs (member GPU sizes) summing to at most `capacity` GPUs, mixed sizes."""
    gangs: list[list[int]] = []
    left = capacity
    while left >= 4:
        members = [rng.choice((2, 4, 4, 8)) for _ in range(rng.randint(2, 4))]
        while sum(members) > left and members:
            members.pop()
        if len(members) < 2:
            break
        gangs.append(members)
        left -= sum(members)
    return gangs


def pod(name: str, gang: str, size: int, gpus: int, fleet: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {GANG_NAME_ANNOTATION: gang, MIN_MEMBER_ANNOTATION: str(size)},
        },
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {FLEET_LABEL: fleet},
            "containers": [
                {"name": "w", "image": "registry.invalid/bench/w:1",
                 "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}},
            ],
        },
    }  # fmt: skip


@dataclass
class Tally:
    gangs: int = 0
    whole: int = 0
    partial: int = 0
    partial_seconds: list[float] = field(default_factory=list)
    held_gpu_seconds: float = 0.0
    bind_seconds: list[float] = field(default_factory=list)


def gang_job(name: str, size: int, gpus: int, fleet: str) -> dict[str, Any]:
    """An Indexed Job of `size` members (a gang: parallelism = completions), each `gpus`."""
    template = pod(name, name, size, gpus, fleet)
    template["metadata"] = {"labels": {"bench.gangkeeper.io/gang": name}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed", "completions": size, "parallelism": size,
            "backoffLimit": 0,  # a requeue by suspension costs the Job no failure
            "template": template,
        },
    }  # fmt: skip


def draw_job_batch(rng: random.Random, capacity: int) -> list[list[int]]:
    """Gangs of one member size each (a Job's members are alike), within `capacity`."""
    gangs: list[list[int]] = []
    left = capacity
    while left >= 4:
        size, gpus = rng.randint(2, 4), rng.choice((2, 4, 4, 8))
        while size * gpus > left and size > 1:
            size -= 1
        if size < 2:
            break
        gangs.append([gpus] * size)
        left -= size * gpus
    return gangs


def competitor(name: str, gpus: int, fleet: str) -> dict[str, Any]:
    body = pod(name, "", 1, gpus, fleet)
    body["metadata"] = {"name": name}
    return body


def _sample(cluster: BenchCluster, namespace: str) -> dict[str, dict[str, tuple[str, int]]]:
    """gang → pod → (node or "", GPUs); pods being deleted are left out."""
    out: dict[str, dict[str, tuple[str, int]]] = {}
    for item in cluster.core.list_namespaced_pod(namespace).items:
        if item.metadata.deletion_timestamp:
            continue
        labels = item.metadata.labels or {}
        gang = (item.metadata.annotations or {}).get(GANG_NAME_ANNOTATION) or labels.get(
            "job-name", ""
        )
        gpus = int(item.spec.containers[0].resources.requests[GPU])
        out.setdefault(gang, {})[item.metadata.name] = (item.spec.node_name or "", gpus)
    return out


def run_round(
    cluster: BenchCluster, batch: Sequence[list[int]], index: int, window: float,
    tallies: dict[str, Tally], *, competed: bool = False,
) -> None:  # fmt: skip
    created = time.monotonic()
    for label, namespace in PLACEMENTS.items():
        fleet = f"place-{label}"
        for g, members in enumerate(batch):
            gang = f"r{index}-g{g}"
            if competed:
                body = gang_job(gang, len(members), members[0], fleet)
                cluster.raw.create(f"/apis/batch/v1/namespaces/{namespace}/jobs", body)
                continue
            for m, gpus in enumerate(members):
                body = pod(f"{gang}-{m}", gang, len(members), gpus, fleet)
                cluster.raw.create(f"/api/v1/namespaces/{namespace}/pods", body)
    if competed:
        # At the moment of release: the gangs' members are being gated and placed now.
        for label in PLACEMENTS:
            for c, gpus in enumerate(COMPETITORS):
                body = competitor(f"r{index}-{label}-c{c}", gpus, f"place-{label}")
                cluster.raw.create(f"/api/v1/namespaces/{OTHER_NAMESPACE}/pods", body)
    first: dict[tuple[str, str], float] = {}
    done: dict[tuple[str, str], float] = {}
    #: Seconds each gang was seen partly bound (beyond the first PARTIAL_GRACE).
    partly: dict[tuple[str, str], float] = {}
    held: dict[str, float] = dict.fromkeys(PLACEMENTS, 0.0)
    last = created
    while time.monotonic() - created < window:
        now = time.monotonic()
        step = now - last
        last = now
        for label, namespace in PLACEMENTS.items():
            for gang, pods in _sample(cluster, namespace).items():
                key = (label, gang)
                bound = [g for node, g in pods.values() if node]
                if bound and key not in first:
                    first[key] = now
                if len(bound) == len(pods) and key not in done:
                    done[key] = now
                if bound and len(bound) < len(pods) and now - first[key] > PARTIAL_GRACE:
                    held[label] += sum(bound) * step
                    partly[key] = partly.get(key, PARTIAL_GRACE) + step
        time.sleep(0.2)
    for label in PLACEMENTS:
        tally = tallies[label]
        for g in range(len(batch)):
            key = (label, f"r{index}-g{g}")
            tally.gangs += 1
            if key in done:
                tally.whole += 1
                tally.bind_seconds.append(done[key] - created)
            partial_for = partly.get(key, 0.0)
            if partial_for > PARTIAL_GRACE:
                tally.partial += 1
                tally.partial_seconds.append(partial_for)
        tally.held_gpu_seconds += held[label]
    for namespace in (*PLACEMENTS.values(), *((OTHER_NAMESPACE,) if competed else ())):
        cluster.clear_pods(namespace)


def run(quick: bool, cluster: BenchCluster | None = None) -> list[dict[str, Any]]:
    """The trial on a sandbox (started here unless given): 3 rounds quick, else 10."""
    if cluster is None:
        with open_cluster(quick=quick) as own:
            return run(quick, own)
    rounds = 3 if quick else 10
    return [
        *trial(cluster, rounds=rounds),
        *trial(cluster, rounds=max(2, rounds // 2), competed=True),
    ]


def trial(
    cluster: BenchCluster, rounds: int, window: float = 12.0, seed: int = 12,
    *, competed: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    rng = random.Random(seed)
    tallies = {label: Tally() for label in PLACEMENTS}
    for label in PLACEMENTS:
        nodes = cluster.ensure_fleet(f"place-{label}", NODES, GPUS, label=FLEET_LABEL)
        cluster.wait_nodes_free(nodes)
    if competed:
        # Long enough for the watchdog to delete a stuck member and the Job to
        # recreate it, and for the target (rebindSeconds + 10 s) to be seen missed.
        window = REBIND_SECONDS + 30.0
    for index in range(rounds):
        if competed:
            batch = draw_job_batch(rng, NODES * GPUS - sum(COMPETITORS))
        else:
            batch = draw_batch(rng, NODES * GPUS)
        run_round(cluster, batch, index, window, tallies, competed=competed)
    rows = []
    for label, t in tallies.items():
        binds = sorted(t.bind_seconds)
        rows.append({
            "placement": label,
            "pods of no gang": "competing" if competed else "none",
            "gangs": t.gangs,
            "bound whole": t.whole,
            "ever partly bound": t.partial,
            "partly bound s (max)": round(max(t.partial_seconds, default=0.0), 1),
            "GPU-s held by partial gangs": round(t.held_gpu_seconds, 1),
            "time to bind whole p50 / max s": (
                f"{binds[len(binds) // 2]:.1f} / {binds[-1]:.1f}" if binds else "-"
            ),
        })  # fmt: skip
    return rows


if __name__ == "__main__":  # pragma: no cover - manual entry point
    import sys

    from bench.report import print_rows

    print_rows("placement", run("--quick" in sys.argv[1:]))
