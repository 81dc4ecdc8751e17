"""Plain-dict builders for tests: pods and training workloads as the API server sends them.

Shared by every test folder (import as `from builders import ...`; tests/ is on the
path through tests/conftest.py). Each builder returns a fresh dict shaped like the
real object, with only the fields a test needs; callers mutate the result to make
bad input. Keep the signatures stable: add parameters with defaults, never change
existing ones.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

GPU = "nvidia.com/gpu"

Obj = dict[str, Any]


def container(
    name: str = "main",
    gpus: int | str | None = None,
    *,
    resource: str = GPU,
    in_requests: bool = False,
    restart_policy: str | None = None,
) -> Obj:
    """A container asking for `gpus` of `resource` in limits (or requests and limits)."""
    body: Obj = {"name": name, "image": "busybox:1.36"}
    if gpus is not None:
        resources: Obj = {"limits": {resource: gpus}}
        if in_requests:
            resources["requests"] = {resource: gpus}
        body["resources"] = resources
    if restart_policy is not None:
        body["restartPolicy"] = restart_policy
    return body


def pod_spec(
    *containers: Obj,
    init_containers: Iterable[Obj] = (),
    overhead: Mapping[str, Any] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Iterable[Obj] = (),
    affinity: Obj | None = None,
) -> Obj:
    """A pod spec; with no containers, one container that asks for nothing."""
    spec: Obj = {"containers": list(containers) or [container()]}
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if overhead is not None:
        spec["overhead"] = dict(overhead)
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if affinity is not None:
        spec["affinity"] = affinity
    return spec


def gpu_spec(gpus: int | str | None, resource: str = GPU) -> Obj:
    """The common case: one container asking for `gpus` GPUs."""
    return pod_spec(container(gpus=gpus, resource=resource))


def template(
    spec: Obj | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """A pod template (metadata + spec)."""
    metadata: Obj = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"metadata": metadata, "spec": spec if spec is not None else pod_spec()}


def gang_annotations(name: str, min_member: int | str) -> dict[str, str]:
    """gangkeeper's explicit gang annotations."""
    return {"gangkeeper.io/gang-name": name, "gangkeeper.io/min-member": str(min_member)}


def _meta(
    name: str,
    namespace: str | None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: Obj | None = None,
    uid: str | None = None,
) -> Obj:
    metadata: Obj = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["uid"] = uid if uid is not None else f"uid-{name}"
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner is not None:
        metadata["ownerReferences"] = [owner_ref(owner)]
    return metadata


def owner_ref(owner: Obj, *, controller: bool = True) -> Obj:
    """A controller ownerReference pointing at `owner`."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"].get("uid", ""),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def pod(
    name: str = "pod-0",
    spec: Obj | None = None,
    *,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: Obj | None = None,
) -> Obj:
    """A Pod; `owner` (an object built here) becomes its controller ownerReference."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, namespace, labels=labels, annotations=annotations, owner=owner),
        "spec": spec if spec is not None else pod_spec(),
    }


def pod_from(tmpl: Obj, name: str = "pod-0", **kwargs: Any) -> Obj:
    """A Pod made from a template as a controller would: template labels/annotations kept."""
    meta = tmpl.get("metadata", {})
    labels = {**meta.get("labels", {}), **kwargs.pop("labels", {})}
    annotations = {**meta.get("annotations", {}), **kwargs.pop("annotations", {})}
    return pod(
        name,
        copy.deepcopy(tmpl["spec"]),
        labels=labels,
        annotations=annotations,
        **kwargs,
    )


def job(
    name: str = "train",
    gpus: int | str | None = 1,
    *,
    parallelism: int | None = 4,
    completions: int | None = None,
    indexed: bool = False,
    namespace: str = "default",
    pod_template: Obj | None = None,
    owner: Obj | None = None,
    suspend: bool | None = None,
) -> Obj:
    """A batch/v1 Job whose pods each ask for `gpus` GPUs."""
    spec: Obj = {"template": pod_template if pod_template is not None else template(gpu_spec(gpus))}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    if indexed:
        spec["completionMode"] = "Indexed"
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, namespace, owner=owner),
        "spec": spec,
    }


def replicated_job(
    name: str,
    replicas: int | None = 1,
    parallelism: int | None = 1,
    gpus: int | str | None = 1,
    *,
    completions: int | None = None,
    pod_template: Obj | None = None,
    job_labels: Mapping[str, str] | None = None,
    depends_on: Iterable[tuple[str, str]] = (),
) -> Obj:
    """One entry of a JobSet's (or a training runtime's) replicatedJobs."""
    job_spec: Obj = {
        "template": pod_template if pod_template is not None else template(gpu_spec(gpus))
    }
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if completions is not None:
        job_spec["completions"] = completions
    entry: Obj = {"name": name, "template": {"spec": job_spec}}
    if job_labels:
        entry["template"]["metadata"] = {"labels": dict(job_labels)}
    if replicas is not None:
        entry["replicas"] = replicas
    deps = [{"name": n, "status": s} for n, s in depends_on]
    if deps:
        entry["dependsOn"] = deps
    return entry


def jobset(
    name: str = "js",
    *replicated_jobs: Obj,
    namespace: str = "default",
    owner: Obj | None = None,
) -> Obj:
    """A JobSet (jobset.x-k8s.io/v1alpha2)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _meta(name, namespace, owner=owner),
        "spec": {"replicatedJobs": list(replicated_jobs) or [replicated_job("workers", 1, 2)]},
    }


def jobset_pod(
    js: Obj, rjob: str, job_index: int = 0, pod_index: int = 0, **kwargs: Any
) -> tuple[Obj, Obj]:
    """(pod, Job) of a JobSet's replicatedJob: the pod is owned by the Job
    `<jobset>-<rjob>-<index>`, which the JobSet owns."""
    js_name = js["metadata"]["name"]
    entry = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == rjob)
    child = job(
        f"{js_name}-{rjob}-{job_index}",
        pod_template=entry["template"]["spec"]["template"],
        namespace=js["metadata"].get("namespace", "default"),
        owner=js,
    )
    labels = {
        "jobset.sigs.k8s.io/jobset-name": js_name,
        "jobset.sigs.k8s.io/replicatedjob-name": rjob,
        "jobset.sigs.k8s.io/job-index": str(job_index),
        "batch.kubernetes.io/job-name": child["metadata"]["name"],
    }
    return pod_from(
        entry["template"]["spec"]["template"],
        f"{child['metadata']['name']}-{pod_index}",
        labels={**labels, **kwargs.pop("labels", {})},
        owner=kwargs.pop("owner", child),
        **kwargs,
    ), child


def training_runtime(
    name: str = "torch-distributed",
    *replicated_jobs: Obj,
    num_nodes: int | None = 1,
    namespace: str | None = None,
    mpi_launcher_as_node: bool | None = None,
) -> Obj:
    """A ClusterTrainingRuntime (or, with `namespace`, a TrainingRuntime)."""
    ml_policy: Obj = {}
    if num_nodes is not None:
        ml_policy["numNodes"] = num_nodes
    if mpi_launcher_as_node is not None:
        ml_policy["mpi"] = {"numProcPerNode": 1, "runLauncherAsNode": mpi_launcher_as_node}
    else:
        ml_policy["torch"] = {"numProcPerNode": "auto"}
    default_node = replicated_job(
        "node",
        None,
        None,
        None,
        pod_template=template(pod_spec(container("node"))),
        job_labels={"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"},
    )
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime" if namespace is not None else "ClusterTrainingRuntime",
        "metadata": _meta(name, namespace),
        "spec": {
            "mlPolicy": ml_policy,
            "template": {"spec": {"replicatedJobs": list(replicated_jobs) or [default_node]}},
        },
    }


def trainjob(
    name: str = "tj",
    runtime: str = "torch-distributed",
    *,
    num_nodes: int | None = None,
    gpus_per_node: int | str | None = None,
    runtime_kind: str | None = None,
    namespace: str = "default",
) -> Obj:
    """A TrainJob (trainer.kubeflow.org/v1alpha1) naming a runtime."""
    ref: Obj = {"name": runtime}
    if runtime_kind is not None:
        ref["kind"] = runtime_kind
    trainer: Obj = {}
    if num_nodes is not None:
        trainer["numNodes"] = num_nodes
    if gpus_per_node is not None:
        trainer["resourcesPerNode"] = {"limits": {GPU: gpus_per_node}}
    spec: Obj = {"runtimeRef": ref}
    if trainer:
        spec["trainer"] = trainer
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


#: kind → (apiVersion, replica-specs field) of the training-operator family.
TRAINING_KINDS: dict[str, tuple[str, str]] = {
    "PyTorchJob": ("kubeflow.org/v1", "pytorchReplicaSpecs"),
    "TFJob": ("kubeflow.org/v1", "tfReplicaSpecs"),
    "MPIJob": ("kubeflow.org/v2beta1", "mpiReplicaSpecs"),
    "XGBoostJob": ("kubeflow.org/v1", "xgbReplicaSpecs"),
    "PaddleJob": ("kubeflow.org/v1", "paddleReplicaSpecs"),
    "JAXJob": ("kubeflow.org/v1", "jaxReplicaSpecs"),
}


def training_job(
    kind: str = "PyTorchJob",
    name: str = "tj",
    replicas: Mapping[str, tuple[int | None, int | str | None]] | None = None,
    *,
    namespace: str = "default",
    min_available: int | None = None,
) -> Obj:
    """A training-operator job; `replicas` maps replica type → (replicas, GPUs per pod)."""
    api_version, field = TRAINING_KINDS[kind]
    specs: Obj = {}
    for replica_type, (count, gpus) in (replicas or {"Master": (1, 1), "Worker": (3, 1)}).items():
        entry: Obj = {"restartPolicy": "OnFailure", "template": template(gpu_spec(gpus))}
        if count is not None:
            entry["replicas"] = count
        specs[replica_type] = entry
    spec: Obj = {field: specs}
    if min_available is not None:
        spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": min_available}}
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


def training_pod(owner: Obj, replica_type: str, index: int = 0) -> Obj:
    """A pod the training-operator made for a replica type of `owner`."""
    field = TRAINING_KINDS[owner["kind"]][1]
    tmpl = owner["spec"][field][replica_type]["template"]
    return pod_from(
        tmpl,
        f"{owner['metadata']['name']}-{replica_type.lower()}-{index}",
        labels={
            "training.kubeflow.org/job-name": owner["metadata"]["name"],
            "training.kubeflow.org/replica-type": replica_type.lower(),
            "training.kubeflow.org/replica-index": str(index),
        },
        owner=owner,
    )


def leader_worker_set(
    name: str = "lws",
    *,
    replicas: int | None = 2,
    size: int | None = 4,
    leader_gpus: int | str | None = 8,
    worker_gpus: int | str | None = 8,
    with_leader_template: bool = True,
    namespace: str = "default",
) -> Obj:
    """A LeaderWorkerSet (leaderworkerset.x-k8s.io/v1)."""
    lwt: Obj = {"workerTemplate": template(gpu_spec(worker_gpus))}
    if with_leader_template:
        lwt["leaderTemplate"] = template(gpu_spec(leader_gpus))
    if size is not None:
        lwt["size"] = size
    spec: Obj = {"leaderWorkerTemplate": lwt}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


def lws_pod(lws: Obj, group: int, worker: int, *, size: int | None = None) -> Obj:
    """A pod of group `group` (worker index 0 = the leader) with the labels LWS sets."""
    lwt = lws["spec"]["leaderWorkerTemplate"]
    key = "leaderTemplate" if worker == 0 and "leaderTemplate" in lwt else "workerTemplate"
    name = lws["metadata"]["name"]
    return pod_from(
        lwt[key],
        f"{name}-{group}" + (f"-{worker}" if worker else ""),
        labels={
            "leaderworkerset.sigs.k8s.io/name": name,
            "leaderworkerset.sigs.k8s.io/group-index": str(group),
            "leaderworkerset.sigs.k8s.io/worker-index": str(worker),
        },
        annotations={"leaderworkerset.sigs.k8s.io/size": str(size or lwt.get("size", 1))},
    )


PODGROUP_API = {
    "volcano": "scheduling.volcano.sh/v1beta1",
    "coscheduling": "scheduling.x-k8s.io/v1alpha1",
}


def podgroup(
    flavour: str = "volcano",
    name: str = "pg",
    min_member: int | None = 4,
    min_resources: Mapping[str, Any] | None = None,
    *,
    namespace: str = "default",
) -> Obj:
    """A Volcano or scheduler-plugins (coscheduling) PodGroup."""
    spec: Obj = {}
    if min_member is not None:
        spec["minMember"] = min_member
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    return {
        "apiVersion": PODGROUP_API[flavour],
        "kind": "PodGroup",
        "metadata": _meta(name, namespace),
        "spec": spec,
    }


class Lookup:
    """An OwnerLookup over objects built here, keyed like the API: kind, namespace, name.

    Cluster-scoped objects (no metadata.namespace) answer for namespace "". Records
    every question in `asked`, so tests can check what was looked up.
    """

    def __init__(self, *objects: Obj) -> None:
        self.objects: dict[tuple[str, str, str, str], Obj] = {}
        self.asked: list[tuple[str, str, str, str]] = []
        for obj in objects:
            self.add(obj)

    def add(self, obj: Obj) -> None:
        group = obj["apiVersion"].rpartition("/")[0]
        meta = obj["metadata"]
        self.objects[(group, obj["kind"], meta.get("namespace", ""), meta["name"])] = obj

    def __call__(self, api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
        self.asked.append((api_version, kind, namespace, name))
        group = api_version.rpartition("/")[0]
        return self.objects.get((group, kind, namespace, name))


def no_lookup(api_version: str, kind: str, namespace: str, name: str) -> Obj | None:
    """An OwnerLookup that knows nothing."""
    return None
