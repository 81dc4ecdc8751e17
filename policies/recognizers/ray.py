"""KubeRay's RayCluster, RayJob and RayService (ray.io/v1): one gang per Ray cluster.

A Ray cluster is its head pod and every worker group's pods, as KubeRay v1.5.0 sizes
the Volcano PodGroup it makes for one (`ray-operator/controllers/ray/batchscheduler/
volcano/volcano_scheduler.go`, `calculatePodGroupParams`; the counts in
`ray-operator/controllers/ray/utils/util.go`):
- a worker group runs `replicas` (default 0) clamped to `[minReplicas, maxReplicas]`
  (defaults 0 and 2^31 - 1; maxReplicas when minReplicas exceeds it), times
  `numOfHosts` (default 1) pods — `GetWorkerGroupDesiredReplicas`, summed by
  `CalculateDesiredReplicas`; a group with `suspend: true` runs none;
- the gang is those workers plus the head, one role per group (`head` for the head);
- with `spec.enableInTreeAutoscaling: true` the autoscaler moves `replicas` between the
  bounds, so minMember is Σ minReplicas x numOfHosts of the groups not suspended, plus
  the head (`CalculateMinReplicas` + 1); members beyond it are released as they fit.
  KubeRay then adds its autoscaler container to the head pod (`common/pod.go`,
  `DefaultHeadPodTemplate`, `BuildAutoscalerContainer`: 500m CPU and 512Mi, or
  `spec.autoscalerOptions.resources` by `mergeAutoscalerOverrides`), so the head's
  requests include it.
Field defaults are the CRD's (`apis/ray/v1/raycluster_types.go`, `WorkerGroupSpec`).

The cluster spec is the RayCluster's `spec`, a RayJob's `spec.rayClusterSpec`
(`apis/ray/v1/rayjob_types.go`) or a RayService's `spec.rayClusterConfig`
(`apis/ray/v1/rayservice_types.go`). A RayJob with `spec.clusterSelector` runs on a
cluster that exists already and makes none: it is no gang. A RayJob in `SidecarMode`
adds its submitter container to the head (`rayjob_controller.go`,
`constructRayClusterForRayJob`; `common/job.go`, `GetDefaultSubmitterContainer`); in
`K8sJobMode` the submitter is a pod of its own batch/v1 Job, not a member (Volcano's
minMember leaves it out too, `handleRayJob`).

Pods: KubeRay labels them `ray.io/cluster`, `ray.io/group` (`headgroup` for the head),
`ray.io/node-type` (`head` | `worker`), `ray.io/is-ray-node`, `ray.io/identifier`
(`common/pod.go`, `labelPod`) and owns them by their RayCluster, itself owned by the
RayJob or RayService that made it. A pod finds its RayCluster through its
ownerReferences and the lookup; its gang is sized from that RayCluster and its source
is the top-level owner, as a TrainJob's is for its JobSet's pods. The gang is named
after the RayJob for a RayJob's cluster (one at a time, the name KubeRay's Volcano
PodGroup takes, `getAppPodGroupName`) and after the cluster otherwise: a RayService
upgrading runs two clusters, two gangs. Each kind is one row of `KINDS` and claims
the pods whose top-level owner is of its kind.

KubeRay can gang the same pods itself (operator flag `--batch-scheduler`, cluster label
`ray.io/gang-scheduling-enabled`; `batchscheduler/*/`, `AddMetadataToChildResource`).
Where the keys its plugins write are on a pod, or on the objects they are copied from,
the gang says so (`Gang.keyed_by`) and its pods are skipped or refused under
`onConflict`, as a Trainer runtime's podGroupPolicy is (the keys: `POD_KEYS` on pods
and templates, `OBJECT_KEYS` on the Ray object). The schedulerName its plugins set
(volcano, yunikorn, scheduler-plugins-scheduler, kai-scheduler) is, unless it is the
backend's own, the foreign scheduler `mutation.plan_pod` already refuses.

Requeuing: a RayCluster is suspended (`spec.suspend`: KubeRay deletes its pods and
recreates them once resumed, `raycluster_controller.go`, `reconcilePods`). A RayJob's
gang is requeued by deleting pods, which its RayCluster recreates: suspending a RayJob
fails it for good when `shutdownAfterJobFinishes` is false, the default
(`utils/validation.go`, `ValidateRayJobSpec`, whose failure is the terminal
`ValidationFailed`). A RayService has no `spec.suspend`: its pods are recreated too.

Pure: reads dicts and calls the caller's lookup; never reads KubeRay's operator flags,
which no object shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidObject
from ..model import Gang, KubeObject, OwnerLookup, PodMembership, Source
from ..names import COSCHEDULING_GROUP_LABEL, VOLCANO_GROUP_ANNOTATION
from ..podspec import as_list, as_mapping, as_str, field_path
from ..settings.config import Config
from .base import PodSignals, Requeuing, ResourceRule
from .common import (
    Meta,
    TemplateRole,
    build_gang,
    claims,
    count,
    items_of,
    owner_chain,
    owner_gangs,
    read_meta,
    role_named,
    template_role,
)

GROUP = "ray.io"
VERSIONS = ("v1",)
RAYCLUSTER = (GROUP, "RayCluster")
RAYJOB = (GROUP, "RayJob")
RAYSERVICE = (GROUP, "RayService")
HEAD = "head"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
#: Every label KubeRay sets on a Ray pod has this prefix (`utils/constant.go`).
POD_LABEL_PREFIX = "ray.io/"
GANG_SCHEDULING_LABEL = "ray.io/gang-scheduling-enabled"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
YUNIKORN_TASK_GROUPS = "yunikorn.apache.org/task-groups"
#: The CRD's default maxReplicas (maxInt32): a bound, not a member count.
MAX_REPLICAS = 2**31 - 1

#: The keys KubeRay's batch-scheduler plugins write on every pod: (plugin, where, key).
POD_KEYS: tuple[tuple[str, str, str], ...] = (
    ("scheduler-plugins", "label", COSCHEDULING_GROUP_LABEL),
    ("volcano", "annotation", VOLCANO_GROUP_ANNOTATION),
    ("yunikorn", "annotation", YUNIKORN_TASK_GROUPS),
    ("kai-scheduler", "label", KAI_QUEUE_LABEL),
)
#: Keys on a Ray object that its plugins copy to, or turn into gang keys on, its pods
#: (RayJob's and RayService's labels and annotations are copied to their RayCluster).
OBJECT_KEYS: tuple[tuple[str, str, str], ...] = (
    ("scheduler-plugins or yunikorn gang scheduling", "label", GANG_SCHEDULING_LABEL),
    ("yunikorn", "annotation", YUNIKORN_TASK_GROUPS),
    ("kai-scheduler", "label", KAI_QUEUE_LABEL),
)

#: `BuildAutoscalerContainer`'s resources, unless autoscalerOptions.resources replaces them.
AUTOSCALER_RESOURCES: Mapping[str, Any] = {
    "limits": {"cpu": "500m", "memory": "512Mi"},
    "requests": {"cpu": "500m", "memory": "512Mi"},
}
#: `GetDefaultSubmitterContainer`'s resources (the SidecarMode submitter in the head).
SUBMITTER_RESOURCES: Mapping[str, Any] = {
    "limits": {"cpu": "1", "memory": "1Gi"},
    "requests": {"cpu": "500m", "memory": "200Mi"},
}


def _found(
    keys: tuple[tuple[str, str, str], ...], labels: Mapping[str, Any],
    annotations: Mapping[str, Any], where: str,
) -> list[str]:
    """The plugin keys among `keys` present, in words naming each key and where."""
    return [
        f"{plugin}: {kind} {key} on {where}"
        for plugin, kind, key in keys
        if key in (labels if kind == "label" else annotations)
    ]


def _template_keys(template: Mapping[str, Any], path: str) -> list[str]:
    metadata_path = field_path(path, "metadata")
    metadata = as_mapping(template.get("metadata"), metadata_path)
    labels = as_mapping(metadata.get("labels"), field_path(metadata_path, "labels"))
    annotations = as_mapping(
        metadata.get("annotations"), field_path(metadata_path, "annotations")
    )
    return _found(POD_KEYS, labels, annotations, path)


def _keyed_by(found: list[str]) -> str:
    return f"KubeRay's batch scheduler ({'; '.join(found)})" if found else ""


def _bound(value: object, path: str) -> int:
    """maxReplicas: whole and ≥ 0, up to the CRD's maxInt32 (never a member count)."""
    if value is None:
        return MAX_REPLICAS
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidObject(path, f"must be a whole number, got {type(value).__name__} {value!r}")
    if not 0 <= value <= MAX_REPLICAS:
        raise InvalidObject(path, f"must be between 0 and {MAX_REPLICAS}, got {value}")
    return value


def _with_container(
    template: Mapping[str, Any], path: str, name: str, resources: Mapping[str, Any]
) -> dict[str, Any]:
    """The pod template with one more container that only requests `resources`."""
    spec_path = field_path(path, "spec")
    spec = dict(as_mapping(template.get("spec"), spec_path, required=True))
    containers = as_list(spec.get("containers"), field_path(spec_path, "containers"))
    spec["containers"] = [*containers, {"name": name, "resources": resources}]
    return {**template, "spec": spec}


def _head_template(
    cluster: Mapping[str, Any], path: str, sidecar: bool
) -> tuple[Mapping[str, Any], str]:
    head_path = field_path(field_path(path, "headGroupSpec"), "template")
    head = as_mapping(cluster.get("headGroupSpec"), field_path(path, "headGroupSpec"),
                      required=True)
    template = as_mapping(head.get("template"), head_path, required=True)
    if cluster.get("enableInTreeAutoscaling") is True:
        options_path = field_path(path, "autoscalerOptions")
        options = as_mapping(cluster.get("autoscalerOptions"), options_path)
        resources = options.get("resources")
        # mergeAutoscalerOverrides replaces the resources whole when they are given.
        chosen = AUTOSCALER_RESOURCES if resources is None else as_mapping(
            resources, field_path(options_path, "resources"))
        template = _with_container(template, head_path, "autoscaler", chosen)
    if sidecar:
        template = _with_container(template, head_path, "ray-job-submitter", SUBMITTER_RESOURCES)
    return template, head_path


def _workers(body: Mapping[str, Any], path: str) -> tuple[int, int]:
    """(pods the worker group runs, its share of the autoscaling minimum)."""
    if body.get("suspend") is True:
        return 0, 0
    replicas = count(body.get("replicas"), field_path(path, "replicas"), 0)
    minimum = count(body.get("minReplicas"), field_path(path, "minReplicas"), 0)
    maximum = _bound(body.get("maxReplicas"), field_path(path, "maxReplicas"))
    hosts = count(body.get("numOfHosts"), field_path(path, "numOfHosts"), 1)
    # KubeRay takes maxReplicas when minReplicas exceeds it: so does this clamp.
    desired = min(max(replicas, minimum), maximum)
    pods = count(desired * hosts, field_path(path, "replicas"), 0)
    return pods, count(minimum * hosts, field_path(path, "minReplicas"), 0)


def cluster_gang(
    meta: Meta,
    cluster: Mapping[str, Any],
    path: str,
    config: Config,
    recognizer: str,
    *,
    sidecar: bool = False,
) -> Gang | None:
    """The gang of a Ray cluster spec at `path`; None when it is one pod."""
    head_template, head_path = _head_template(cluster, path, sidecar)
    parts: list[TemplateRole] = [template_role(HEAD, 1, head_template, head_path, config)]
    keys = [*_found(OBJECT_KEYS, meta.labels, meta.annotations, f"the {meta.kind}"),
            *_template_keys(head_template, head_path)]
    minimum = 1
    names = {HEAD: "the head's role"}
    for item_path, item in items_of(cluster.get("workerGroupSpecs"),
                                    field_path(path, "workerGroupSpecs")):
        body = as_mapping(item, item_path, required=True)
        name_path = field_path(item_path, "groupName")
        name = as_str(body.get("groupName"), name_path)
        if name.lower() in names:
            # Roles are told apart by name; two of one name would merge silently.
            raise InvalidObject(name_path, f"{name!r} is already the name of {names[name.lower()]}")
        names[name.lower()] = f"the group at {item_path}"
        pods, group_minimum = _workers(body, item_path)
        minimum += group_minimum
        template_path = field_path(item_path, "template")
        template = as_mapping(body.get("template"), template_path, required=True)
        parts.append(template_role(name, pods, template, template_path, config))
        if pods:
            keys.extend(_template_keys(template, template_path))
    autoscaled = cluster.get("enableInTreeAutoscaling") is True
    gang = build_gang(meta, meta.name, parts, recognizer, minimum if autoscaled else None)
    if gang is None:
        return None
    return replace(gang, keyed_by=_keyed_by(keys)) if keys else gang


@dataclass(frozen=True)
class RayRecognizer:
    """A recogniser for one KubeRay kind; a row of `KINDS` only fills the names."""

    name: str
    kind: str
    plural: str
    #: Where the kind holds its Ray cluster spec ("" for the RayCluster's own spec).
    cluster_field: str
    requeue: Requeuing

    @property
    def rules(self) -> tuple[ResourceRule, ...]:
        return (ResourceRule(GROUP, VERSIONS, self.plural, self.kind),)

    @property
    def pod_label_prefixes(self) -> tuple[str, ...]:
        # The head may request no GPU: its labels let it through the pod webhooks.
        return (POD_LABEL_PREFIX,)

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        if not claims(obj, (GROUP, self.kind), VERSIONS):
            return None
        meta = read_meta(obj)
        spec = as_mapping(obj.get("spec"), "spec", required=True)
        if not self.cluster_field:
            gang = cluster_gang(meta, spec, "spec", config, self.name)
            return [gang] if gang is not None else []
        path = field_path("spec", self.cluster_field)
        if self.kind == "RayJob":
            selector = as_mapping(spec.get("clusterSelector"), "spec.clusterSelector")
            if selector:  # it runs on a RayCluster that exists: it makes none
                return []
            if spec.get(self.cluster_field) is None:
                raise InvalidObject(path, "is required unless spec.clusterSelector names a cluster")
        cluster = as_mapping(spec.get(self.cluster_field), path, required=True)
        mode = as_str(spec.get("submissionMode"), "spec.submissionMode", default="")
        sidecar = self.kind == "RayJob" and mode == "SidecarMode"
        gang = cluster_gang(meta, cluster, path, config, self.name, sidecar=sidecar)
        return [gang] if gang is not None else []

    def may_claim(self, signals: PodSignals) -> bool:
        owners = signals.owners
        return RAYCLUSTER in owners and (self.kind == RAYCLUSTER[1] or (GROUP, self.kind) in owners)

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        meta = read_meta(pod)
        chain = owner_chain(pod, meta.namespace, lookup)
        at = next((i for i, lk in enumerate(chain) if (lk.group, lk.kind) == RAYCLUSTER), None)
        if at is None:
            return None
        cluster = chain[at]
        above = chain[at + 1] if at + 1 < len(chain) else None
        wrapped = above is not None and (above.group, above.kind) in (RAYJOB, RAYSERVICE)
        top = above if above is not None and wrapped else cluster
        if (top.group, top.kind) != (GROUP, self.kind) or cluster.obj is None:
            return None
        gangs = owner_gangs(KINDS[0], cluster.obj, lookup, config)
        if not gangs:
            return None
        gang = gangs[0]
        if top is not cluster:
            source = Source(top.api_version, top.kind, meta.namespace, top.name, top.uid)
            gang = replace(gang, source=source, recognizer=self.name)
        if top.kind == RAYJOB[1] and gang.name == cluster.name:
            # A RayJob runs one cluster at a time: its gang keeps the RayJob's name, as
            # KubeRay's PodGroup does (`getAppPodGroupName`); an explicit name still wins.
            gang = replace(gang, name=top.name)
        on_pod = _found(POD_KEYS, meta.labels, meta.annotations, "the pod")
        if on_pod and not gang.keyed_by:
            gang = replace(gang, keyed_by=_keyed_by(on_pod))
        if meta.labels.get(NODE_TYPE_LABEL) == HEAD:
            return PodMembership(gang, HEAD)
        role = role_named(gang, meta.labels.get(GROUP_LABEL, ""))
        return PodMembership(gang, role) if role is not None and role != HEAD else None


#: The kinds, in the order the registry asks them about pods (each claims only pods
#: whose top-level owner is of its kind). The RayCluster row comes first: the others
#: size their pods' gangs with it.
KINDS: tuple[RayRecognizer, ...] = (
    RayRecognizer(
        "raycluster", "RayCluster", "rayclusters", "",
        Requeuing(
            "suspend",
            "requeue a RayCluster's gang the same way (a suspended RayCluster's pods are "
            "deleted by KubeRay and recreated once it is resumed); patch only, get and list "
            "from the owner rule",
        ),
    ),
    RayRecognizer("rayjob", "RayJob", "rayjobs", "rayClusterSpec", Requeuing("recreate")),
    RayRecognizer(
        "rayservice", "RayService", "rayservices", "rayClusterConfig", Requeuing("recreate")
    ),
)
