"""Pods as the workload controllers create them, and AdmissionReviews around objects.

The HTTP tests send every example through the server; for /mutate they need the pods
the Job, JobSet, Trainer, training-operator, MPI, LeaderWorkerSet and KubeRay controllers
would create from each example's templates: the template plus the labels and
ownerReferences those controllers set (names from their upstream sources). Intermediate
objects the server's owner lookup needs but no example file holds (the JobSet a TrainJob
creates, the RayCluster of a RayJob or RayService) come from `children_for`.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

Obj = Mapping[str, Any]

TRAINING_OPERATOR_KINDS = {"PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"}
#: KubeRay kinds that make a RayCluster, and the field holding its spec.
RAY_CLUSTER_SPECS = {"RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _ref(obj: Obj, *, api_version: str | None = None, kind: str | None = None,
         name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": api_version or obj["apiVersion"],
        "kind": kind or obj["kind"],
        "name": name or _meta(obj)["name"],
        "uid": _meta(obj).get("uid") or str(uuid.uuid5(uuid.NAMESPACE_DNS, str(name))),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _pod(
    template: Obj,
    *,
    namespace: str,
    prefix: str,
    labels: Mapping[str, str],
    owner: dict[str, Any],
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    template = copy.deepcopy(dict(template))
    metadata = dict(template.get("metadata") or {})
    metadata["generateName"] = f"{prefix}-"
    metadata["namespace"] = namespace
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    if annotations:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
    metadata["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def _job_labels(job_name: str, index: int = 0) -> dict[str, str]:
    return {
        "batch.kubernetes.io/job-name": job_name,
        "job-name": job_name,
        "batch.kubernetes.io/job-completion-index": str(index),
    }


def _jobset_pods(
    jobset_name: str, namespace: str, replicated_jobs: Sequence[Obj]
) -> list[dict[str, Any]]:
    pods = []
    for rjob in replicated_jobs:
        job_name = f"{jobset_name}-{rjob['name']}-0"
        labels = {
            **_job_labels(job_name),
            "jobset.sigs.k8s.io/jobset-name": jobset_name,
            "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"],
            "jobset.sigs.k8s.io/job-index": "0",
        }
        owner = _ref({}, api_version="batch/v1", kind="Job", name=job_name)
        pods.append(_pod(rjob["template"]["spec"]["template"], namespace=namespace,
                         prefix=job_name, labels=labels, owner=owner))
    return pods


def _runtime(trainjob: Obj, documents: Sequence[Obj]) -> Obj:
    ref = trainjob["spec"]["runtimeRef"]
    for doc in documents:
        if doc.get("kind") == ref.get("kind", "ClusterTrainingRuntime") and (
            _meta(doc).get("name") == ref["name"]
        ):
            return doc
    raise AssertionError(f"runtime {ref['name']} not in the example file")


def _ray_pods(cluster: Obj) -> list[dict[str, Any]]:
    """The head and one pod per worker group, labelled as KubeRay's `labelPod` does
    (ray-operator/controllers/ray/common/pod.go) and owned by the RayCluster."""
    name, namespace = _meta(cluster)["name"], _meta(cluster).get("namespace") or "default"
    spec = cluster["spec"]
    groups = [("head", "headgroup", spec["headGroupSpec"]["template"])] + [
        ("worker", g["groupName"], g["template"]) for g in spec.get("workerGroupSpecs", [])
    ]
    return [
        _pod(template, namespace=namespace, prefix=f"{name}-{group}", owner=_ref(cluster),
             labels={"ray.io/is-ray-node": "yes", "ray.io/cluster": name,
                     "ray.io/node-type": node_type, "ray.io/group": group,
                     "ray.io/identifier": f"{name}-{node_type}"})
        for node_type, group, template in groups
    ]


def pods_for(obj: Obj, documents: Sequence[Obj] = ()) -> list[dict[str, Any]]:
    """One pod per template of `obj`, as its controller would create it ([] for none)."""
    kind, meta = obj.get("kind"), _meta(obj)
    namespace = meta.get("namespace") or "default"
    name = meta.get("name", "")
    if kind == "Pod":
        return [copy.deepcopy(dict(obj))]
    if kind == "Job":
        return [_pod(obj["spec"]["template"], namespace=namespace, prefix=f"{name}-0",
                     labels=_job_labels(name), owner=_ref(obj))]
    if kind == "JobSet":
        return _jobset_pods(name, namespace, obj["spec"]["replicatedJobs"])
    if kind == "TrainJob":
        runtime = _runtime(obj, documents)
        rjobs = copy.deepcopy(runtime["spec"]["template"]["spec"]["replicatedJobs"])
        per_node = (obj["spec"].get("trainer") or {}).get("resourcesPerNode")
        for rjob in rjobs:
            if per_node and rjob["name"] == "node":
                # The Trainer controller writes resourcesPerNode into the node container.
                container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
                container["resources"] = copy.deepcopy(per_node)
        return _jobset_pods(name, namespace, rjobs)
    if kind in TRAINING_OPERATOR_KINDS:
        spec = obj["spec"]
        key = next(k for k in spec if k.endswith("ReplicaSpecs"))
        pods = []
        for replica_type, replica in spec[key].items():
            role = replica_type.lower()
            labels = {
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/replica-type": role,
                "training.kubeflow.org/job-role": role,
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/operator-name": f"{str(kind).lower()}-controller",
            }
            pods.append(_pod(replica["template"], namespace=namespace,
                             prefix=f"{name}-{role}-0", labels=labels, owner=_ref(obj)))
        return pods
    if kind == "LeaderWorkerSet":
        template = obj["spec"]["leaderWorkerTemplate"]
        size = str(template.get("size", 1))
        leader = template.get("leaderTemplate") or template["workerTemplate"]
        common = {"leaderworkerset.sigs.k8s.io/name": name,
                  "leaderworkerset.sigs.k8s.io/group-index": "0"}
        annotations = {"leaderworkerset.sigs.k8s.io/size": size}
        return [
            _pod(leader, namespace=namespace, prefix=f"{name}-0",
                 labels={**common, "leaderworkerset.sigs.k8s.io/worker-index": "0"},
                 annotations=annotations,
                 owner=_ref({}, api_version="apps/v1", kind="StatefulSet", name=name)),
            _pod(template["workerTemplate"], namespace=namespace, prefix=f"{name}-0-1",
                 labels={**common, "leaderworkerset.sigs.k8s.io/worker-index": "1"},
                 annotations=annotations,
                 owner=_ref({}, api_version="apps/v1", kind="StatefulSet", name=f"{name}-0")),
        ]
    if kind == "RayCluster":
        return _ray_pods(obj)
    if kind in RAY_CLUSTER_SPECS:
        return _ray_pods(children_for(obj)[0])
    return []


def children_for(obj: Obj) -> list[dict[str, Any]]:
    """Objects a controller creates between `obj` and its pods that lookups follow."""
    meta = _meta(obj)
    if obj.get("kind") in RAY_CLUSTER_SPECS:
        # KubeRay names the cluster <name>-<5 random characters> and owns it.
        return [
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {
                    "name": f"{meta['name']}-x7k2p",
                    "namespace": meta.get("namespace") or "default",
                    "ownerReferences": [_ref(obj)],
                },
                "spec": copy.deepcopy(obj["spec"][RAY_CLUSTER_SPECS[str(obj["kind"])]]),
            }
        ]
    if obj.get("kind") != "TrainJob":
        return []
    return [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace") or "default",
                "ownerReferences": [_ref(obj)],
            },
            "spec": {"replicatedJobs": []},
        }
    ]


def admission_review(
    obj: Obj | None,
    *,
    operation: str = "CREATE",
    dry_run: bool = False,
    old: Obj | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    source = obj if obj is not None else old or {}
    api_version = str(source.get("apiVersion", "v1"))
    group, _, version = api_version.rpartition("/")
    kind = str(source.get("kind", ""))
    meta = _meta(source)
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace") or "default",
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }
