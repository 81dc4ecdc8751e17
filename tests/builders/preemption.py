"""Plain-dict builders for preemption's unit and property tests: running gangs and pods
of no gang with priorities, a waiting gang of higher priority, PodDisruptionBudgets.

Test helpers only: dicts as the API server sends them, and the plan they give.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from builders.gangs import T0, members, pod, stamp
from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.release.budgets import read_budgets
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.settings.config import Config


def job(name: str) -> dict[str, str]:
    return {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"{name}-uid"}


def prioritised(raw: dict[str, Any], priority: int, *, never: bool = False,
                started: float | None = None) -> dict[str, Any]:
    raw["spec"]["priority"] = priority
    if never:
        raw["spec"]["preemptionPolicy"] = "Never"
    if started is not None:
        raw["status"]["startTime"] = stamp(started)
    return raw


def running_gang(
    name: str, nodes: Sequence[str], gpus: int, priority: int, *, started: float = T0,
) -> list[dict[str, Any]]:
    """A Job's gang released and bound whole: member i on `nodes[i]`."""
    found = members(name, len(nodes), gates=(), gpus=gpus, owner=job(name), created=started)
    for raw, where in zip(found, nodes, strict=True):
        raw["spec"]["nodeName"] = where
        raw["status"] = {"phase": "Running"}
        prioritised(raw, priority, started=started)
    return found


def running_pod(name: str, where: str, gpus: int, priority: int, *, started: float = T0,
                labels: dict[str, str] | None = None) -> dict[str, Any]:
    raw = pod(name, gpus, gates=(), node_name=where, created=started, extra_labels=labels)
    raw["status"] = {"phase": "Running"}
    return prioritised(raw, priority, started=started)


def waiting_gang(name: str, count: int, gpus: int, priority: int, *, created: float = T0 + 100,
                 never: bool = False, **kwargs: Any) -> list[dict[str, Any]]:
    """A complete gang, gated, of higher priority (created after the running work)."""
    return [
        prioritised(raw, priority, never=never)
        for raw in members(name, count, gpus=gpus, owner=job(name), created=created, **kwargs)
    ]


def budget(name: str, labels: dict[str, str], allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "team"},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {"disruptionsAllowed": allowed},
    }


def planned(
    pods: Iterable[dict[str, Any]],
    nodes: Iterable[dict[str, Any]],
    *,
    config: Config | None = None,
    leaving: frozenset[str] = frozenset(),
    budgets: Iterable[dict[str, Any]] = (),
) -> Plan:
    cfg = config or Config()
    read = read_budgets(budgets)
    infos = [pod_info(p, cfg) for p in pods if is_live(p)]
    return plan(infos, list(nodes), cfg, T0 + 200, leaving=leaving, budgets=read)
