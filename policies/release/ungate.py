"""`gangkeeper ungate` decided from plain objects: the way out while the controller
is not running (uninstalled, or scaled to zero) that keeps all-or-nothing.

`ungate_plan(pods, nodes, config, now, requests=...)` runs the controller's own plan,
pass after pass as the controller would (each pass sees the gates the previous one
lifted as lifted, and its pins as pinned, so the next gang in line is judged against
them), and collects every release — with the controller's pins (placement `pinned`),
the consume annotations of a provisioned ProvisioningRequest, and the placeholders to
delete first. The gangs still gated after that are what only `--force` would release
— without the guarantee, so the command warns.

Pure: dicts in, frozen dataclasses out; the command lists and patches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .. import names
from ..assigner.pin import pinned
from ..autoscaling.provisioning import request_info
from ..cluster.observed_gangs import PodInfo, is_live, pod_info
from ..settings.config import Config
from .plan import plan
from .results import GangReport, Release

#: Passes after which the planning stops (each pass releases at least one gang).
MAX_PASSES = 10_000


@dataclass(frozen=True)
class UngatePlan:
    #: Gangs that fit now, in the order the controller would release them.
    releases: tuple[Release, ...]
    #: Gangs left gated (waiting), with why; `--force` releases their gated members.
    waiting: tuple[GangReport, ...]
    #: The gated members of `waiting`, by (namespace, gang label).
    waiting_pods: Mapping[tuple[str, str], tuple[PodInfo, ...]]


def _lifted(info: PodInfo, node: str | None) -> PodInfo:
    """The member as the release patch leaves it: gate gone, pinned if it was."""
    lifted = replace(info, gates=tuple(g for g in info.gates if g != names.GATE))
    return replace(lifted, placement=pinned(info.placement, node)) if node else lifted


def ungate_plan(
    pods: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    config: Config,
    now: float,
    namespace: str | None = None,
    *,
    requests: Iterable[Mapping[str, Any]] | None = None,
) -> UngatePlan:
    """What `gangkeeper ungate` releases (all namespaces, or `namespace`'s gangs);
    `requests`: the ProvisioningRequest dicts (None: not asked through, or not served),
    so a provisioned gang is released onto its booked capacity."""
    node_list = list(nodes)
    request_list = (None if requests is None
                    else [i for r in requests if (i := request_info(r)) is not None])
    infos = {(p.namespace, p.name): p for p in (pod_info(raw, config) for raw in pods
                                                if is_live(raw))}
    releases: list[Release] = []
    reports: tuple[GangReport, ...] = ()
    for _ in range(MAX_PASSES):
        result = plan(infos.values(), node_list, config, now, requests=request_list)
        reports = result.reports
        fresh = [r for r in result.releases
                 if namespace is None or r.gang.namespace == namespace]
        if not fresh:
            break
        for release in fresh:
            releases.append(release)
            for pod in release.pods:
                infos[(pod.namespace, pod.name)] = _lifted(pod, release.pins.get(pod.uid))
            for gone in release.placeholders:
                infos.pop((gone.namespace, gone.name), None)
    waiting = tuple(
        r for r in reports
        if r.gated and r.state == "waiting" and (namespace is None or r.namespace == namespace)
    )
    keys = {(r.namespace, r.label) for r in waiting}
    members: dict[tuple[str, str], list[PodInfo]] = {}
    for info in infos.values():
        if info.gated and (info.namespace, info.gang) in keys:
            members.setdefault((info.namespace, info.gang), []).append(info)
    return UngatePlan(
        releases=tuple(releases),
        waiting=waiting,
        waiting_pods={k: tuple(sorted(v, key=lambda p: p.name)) for k, v in members.items()},
    )
