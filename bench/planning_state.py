"""The cluster states `bench.planning` plans over, built in this process.

The trace is `bench.load`'s (`gang_mix(gangs)`: bare annotated pods, Indexed Jobs and
JobSets of 2 to 32 one-GPU members, 10 on average) on `fleet_of(nodes)` 8-GPU nodes, so
the figures here and the live load run describe the same cluster. Every pod is made
as its controller makes it (ownerReferences to its Job, the Job's to its JobSet) and
then admitted by the real `decide_pod`, whose patch (gang label, annotations, gate,
scheduler name) is applied, so the planner reads exactly what the API server would
hold. Three states follow one another as in a burst:

- `burst`: every member created and gated, nothing bound;
- `inflight`: the burst pass's releases applied with the controller's own patch
  (`writes.ungate_patch`: gate lifted, pinned) and not bound yet;
- `settled`: those pods bound to the nodes they were pinned to, Running and Ready;
  the gangs that did not fit wait gated.

Pure construction of dicts; touches no file, process or network.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from bench.load import GangSpec, gang_mix
from gangkeeper.policies import Capacity, Config, decide_pod
from gangkeeper.policies.admission.decision import Memos
from gangkeeper.policies.assigner.pin import pin_of
from gangkeeper.policies.cluster.observed_gangs import PodInfo, matters, pod_info
from gangkeeper.policies.cluster.shared_parts import SharedParts
from gangkeeper.policies.names import GANG_NAME_ANNOTATION, MIN_MEMBER_ANNOTATION
from gangkeeper.policies.podspec import placement_of
from gangkeeper.policies.release.results import Plan
from gangkeeper.webhook.controller.writes import ungate_patch
from gangkeeper.webhook.sandbox.nodes import fleet_of

NAMESPACE = "bench-planning"
#: Creation times: one member every 10 ms from here, in trace order.
EPOCH = 1_800_000_000.0
JOB_NAME_LABEL = "job-name"
JOBSET_LABELS = (
    "jobset.sigs.k8s.io/jobset-name",
    "jobset.sigs.k8s.io/replicatedjob-name",
    "jobset.sigs.k8s.io/job-index",
)


def _stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _template() -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [{
            "name": "trainer", "image": "registry.invalid/bench/trainer:1",
            "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1"},
                          "limits": {"nvidia.com/gpu": "1"}},
        }],
    }


def _job(name: str, size: int, uid: str, owner: Mapping[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "uid": uid,
                            "resourceVersion": "1"}
    labels: dict[str, str] = {}
    if owner is not None:
        js = owner["metadata"]["name"]
        labels = dict(zip(JOBSET_LABELS, (js, "w", "0"), strict=True))
        meta["labels"] = labels
        meta["ownerReferences"] = [{
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": js,
            "uid": owner["metadata"]["uid"], "controller": True,
        }]
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
        "spec": {"completionMode": "Indexed", "completions": size, "parallelism": size,
                 "backoffLimit": 0,
                 "template": {"metadata": {"labels": labels}, "spec": _template()}},
    }


def _jobset(name: str, size: int, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "resourceVersion": "1"},
        "spec": {"replicatedJobs": [{
            "name": "w", "replicas": 1,
            "template": {"spec": {"completionMode": "Indexed", "completions": size,
                                  "parallelism": size, "backoffLimit": 0,
                                  "template": {"spec": _template()}}},
        }]},
    }


@dataclass
class _Objects:
    owners: dict[tuple[str, str, str, str], dict[str, Any]]
    pods: list[dict[str, Any]]


def _objects(specs: Sequence[GangSpec]) -> _Objects:
    owners: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    pods: list[dict[str, Any]] = []
    for g, spec in enumerate(specs):
        job: dict[str, Any] | None = None
        if spec.kind == "jobset":
            js = _jobset(spec.name, spec.size, f"uid-js-{g}")
            owners[("jobset.x-k8s.io/v1alpha2", "JobSet", NAMESPACE, spec.name)] = js
            job = _job(f"{spec.name}-w-0", spec.size, f"uid-job-{g}", js)
        elif spec.kind == "job":
            job = _job(spec.name, spec.size, f"uid-job-{g}", None)
        if job is not None:
            owners[("batch/v1", "Job", NAMESPACE, job["metadata"]["name"])] = job
        for i in range(spec.size):
            meta: dict[str, Any] = {"namespace": NAMESPACE}
            if job is None:
                meta["name"] = f"{spec.name}-{i:02d}"
                meta["annotations"] = {GANG_NAME_ANNOTATION: spec.name,
                                       MIN_MEMBER_ANNOTATION: str(spec.size)}
            else:
                job_name = job["metadata"]["name"]
                meta["name"] = f"{job_name}-{i}-x{g:04x}"
                labels = dict(job["spec"]["template"]["metadata"]["labels"])
                labels[JOB_NAME_LABEL] = job_name
                labels["batch.kubernetes.io/job-completion-index"] = str(i)
                meta["labels"] = labels
                meta["annotations"] = {"batch.kubernetes.io/job-completion-index": str(i)}
                meta["ownerReferences"] = [{
                    "apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                    "uid": job["metadata"]["uid"], "controller": True,
                    "blockOwnerDeletion": True,
                }]
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                         "spec": _template()})
    return _Objects(owners, pods)


def admitted_pods(specs: Sequence[GangSpec], nodes: Sequence[Mapping[str, Any]],
                  config: Config) -> list[dict[str, Any]]:
    """Every member as the mutating webhook leaves it, with API-server metadata."""
    objects = _objects(specs)
    capacity = Capacity.from_nodes(nodes, config)
    memos = Memos()

    def lookup(api_version: str, kind: str, namespace: str, name: str) -> Any:
        return objects.owners.get((api_version, kind, namespace, name))

    out: list[dict[str, Any]] = []
    for index, pod in enumerate(objects.pods):
        decision = decide_pod(pod, namespace=NAMESPACE, capacity=capacity, lookup=lookup,
                              config=config, memos=memos)
        # A benchmark of the wrong answer is worthless: every member is a gang member
        # admitted and patched (gated) by the webhook.
        assert decision.membership is not None and decision.patched is not None, (
            pod["metadata"]["name"], decision.skipped)
        admitted = copy.deepcopy(decision.patched)
        meta = admitted["metadata"]
        meta["uid"] = f"uid-pod-{index}"
        meta["resourceVersion"] = str(100 + index)
        meta["creationTimestamp"] = _stamp(EPOCH + index * 0.01)
        out.append(admitted)
    return out


def released(pods: Sequence[dict[str, Any]], result: Plan, wall: float) -> list[dict[str, Any]]:
    """The pods after the controller sent the plan's releases (gates lifted, pinned)."""
    patches: dict[str, list[dict[str, Any]]] = {}
    for release in result.releases:
        for member in release.pods:
            if member.gated:
                patches[member.uid] = ungate_patch(member, release.pins.get(member.uid), wall)
    out = []
    for pod in pods:
        ops = patches.get(pod["metadata"]["uid"])
        if ops is None:
            out.append(pod)
            continue
        after = jsonpatch.apply_patch(pod, ops)
        after["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
        out.append(after)
    return out


def bound(
    pods: Sequence[dict[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Pinned, ungated pods bound where they were pinned (if that node is among
    `nodes`, as the scheduler would), Running and Ready."""
    names = {str(n["metadata"]["name"]) for n in nodes}
    out = []
    for pod in pods:
        spec = pod["spec"]
        pin = None if spec.get("schedulingGates") else pin_of(placement_of(spec))
        if pin is None or pin.node not in names:
            out.append(pod)
            continue
        after = copy.deepcopy(pod)
        after["spec"]["nodeName"] = pin.node
        after["status"] = {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}
        after["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 1)
        out.append(after)
    return out


def infos(
    pods: Iterable[Mapping[str, Any]], config: Config, shared: SharedParts,
    store: dict[tuple[str, str], PodInfo] | None = None,
) -> list[PodInfo]:
    """What the controller's pod store holds for these pods (read once, at the watch).

    With `store` (kept by the caller from state to state), a pod at a resourceVersion
    already read is the object read then, as the controller's `Store` keeps it: only
    the pods that changed are new objects."""
    out = []
    for pod in pods:
        meta = pod["metadata"]
        key = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
        info = store.get(key) if store is not None else None
        if info is None:
            info = pod_info(pod, config, shared)
            if store is not None:
                store[key] = info
        if matters(info):
            out.append(info)
    return out


def trace(gangs: int, seed: int = 14) -> tuple[list[GangSpec], list[dict[str, Any]]]:
    """`gangs` gangs of `bench.load`'s mix on as many 8-GPU nodes."""
    return gang_mix(gangs, seed), fleet_of(gangs)
