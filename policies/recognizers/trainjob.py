"""Kubeflow Trainer TrainJob (trainer.kubeflow.org/v1alpha1), resolved with its runtime.

A TrainJob names a ClusterTrainingRuntime (the default kind) or a namespaced
TrainingRuntime in `spec.runtimeRef`; the runtime's `spec.template` is a JobSet spec
that the Trainer controller turns into a JobSet of the TrainJob's name. What the
TrainJob sets wins over the runtime, as in the Trainer's plugins:
- `spec.trainer.numNodes` (else the runtime's `mlPolicy.numNodes`, else 1) is the pod
  count of the `node` replicatedJob; with MPI `runLauncherAsNode` the launcher is one
  of those nodes, so `node` runs numNodes - 1 pods;
- `spec.trainer.resourcesPerNode` goes only to containers named `node`, in the
  replicatedJobs labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`
  and, with MPI `runLauncherAsNode`, in the `node` replicatedJob too (Trainer v2.2.0
  `pkg/runtime/framework/plugins/jobset/builder.go`; a runtime with no container of
  that name gets nothing). v2.2.0 replaces that container's resources when
  resourcesPerNode sets limits or requests; v2.3+ merges them per resource
  (`pkg/runtime/core/trainingruntime.go` with `MergeResourceRequirements` of
  `pkg/util/trainingruntime/trainingruntime.go`, kubeflow/trainer#3602).
  `Config.trainer_resources` says which release runs.
Initializer jobs finish before the trainer starts and are not gang members.
A runtime with `podGroupPolicy` has Trainer key the pods for its own gang scheduler:
the gang says so (`Gang.keyed_by`), and its pods are not keyed a second time.

A runtime the lookup does not know is an InvalidObject naming spec.runtimeRef when
the TrainJob itself is validated; its pods are then not sized (None): the size
cannot be known without the runtime and is never guessed.

Pure: reads dicts and calls the caller's lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..errors import InvalidObject
from ..model import Gang, KubeObject, OwnerLookup, PodMembership
from ..names import COSCHEDULING_GROUP_LABEL, VOLCANO_GROUP_ANNOTATION
from ..podspec import as_list, as_mapping, as_str, field_path
from ..quantity import gpu_count
from ..settings.config import Config
from .base import OwnerResource, PodSignals, Requeuing, ResourceRule
from .common import (
    build_gang,
    claims,
    controller_ref,
    count,
    group_of,
    items_of,
    lookup_object,
    owner_chain,
    read_meta,
    topmost,
    type_of,
)
from .jobset import JOBSET, JOBSET_NAME_LABEL, jobset_of_pod, member_of, replicated_job_parts

TRAINJOB = ("trainer.kubeflow.org", "TrainJob")
TRAINER_VERSION = "v1alpha1"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
NODE = "node"
LAUNCHER = "launcher"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
_RUNTIMES_WHY = "the runtimes that give a TrainJob its shape; read-only"
#: The gang schedulers a runtime's podGroupPolicy can name (v2.2.0), with the key
#: Trainer puts on every pod for each (value: the TrainJob's name).
POD_GROUP_SOURCES = {
    "coscheduling": f"label {COSCHEDULING_GROUP_LABEL}",
    "volcano": f"annotation {VOLCANO_GROUP_ANNOTATION}",
}


def _runtime(
    trainjob: Mapping[str, Any], namespace: str, lookup: OwnerLookup
) -> tuple[Mapping[str, Any] | None, str]:
    """The runtime object (None when the lookup does not know it) and the prefix
    that names its fields in messages."""
    spec = as_mapping(trainjob.get("spec"), "spec", required=True)
    ref = as_mapping(spec.get("runtimeRef"), "spec.runtimeRef", required=True)
    name = as_str(ref.get("name"), "spec.runtimeRef.name")
    kind = as_str(ref.get("kind"), "spec.runtimeRef.kind", default="ClusterTrainingRuntime")
    group = as_str(ref.get("apiGroup"), "spec.runtimeRef.apiGroup", default=TRAINJOB[0])
    if kind not in RUNTIME_KINDS or group != TRAINJOB[0]:
        raise InvalidObject(
            "spec.runtimeRef",
            f"must name a {' or '.join(RUNTIME_KINDS)} of {TRAINJOB[0]}, got {group}/{kind}",
        )
    # A ClusterTrainingRuntime is cluster-scoped: the lookup gets an empty namespace.
    scope = namespace if kind == "TrainingRuntime" else ""
    runtime = lookup_object(lookup, f"{group}/{TRAINER_VERSION}", kind, scope, name)
    if runtime is None:
        where = f" in namespace {namespace}" if scope else ""
        return None, f"{kind} {name!r}{where}"
    return runtime, f"{kind}/{name}"


def _resources_per_node(trainer: Mapping[str, Any], config: Config) -> Mapping[str, Any] | None:
    path = "spec.trainer.resourcesPerNode"
    raw = trainer.get("resourcesPerNode")
    if raw is None:
        return None
    resources = as_mapping(raw, path)
    # Checked here so a bad GPU count is reported where the user wrote it, not at
    # the runtime template it is copied into.
    for part in ("requests", "limits"):
        part_path = field_path(path, part)
        for name, amount in as_mapping(resources.get(part), part_path).items():
            if isinstance(name, str) and config.is_gpu_resource(name):
                gpu_count(amount, field_path(part_path, name))
    return resources


def _merged(base: object, override: Mapping[str, Any]) -> dict[str, Any]:
    """Trainer v2.3+: limits and requests merged per resource, the TrainJob's winning
    (a strategic merge patch of ResourceRequirements)."""
    merged = dict(base) if isinstance(base, Mapping) else {}
    for part in ("limits", "requests"):
        given = override.get(part)
        if isinstance(given, Mapping):
            current = merged.get(part)
            merged[part] = {**(current if isinstance(current, Mapping) else {}), **given}
    return merged


def _with_resources(
    pod_template: Mapping[str, Any], resources: Mapping[str, Any], config: Config
) -> dict[str, Any]:
    """The pod template with resourcesPerNode applied to its `node` containers."""
    if resources.get("limits") is None and resources.get("requests") is None:
        return dict(pod_template)  # neither release changes anything then
    spec = dict(as_mapping(pod_template.get("spec"), "spec"))
    containers = [
        dict(c) if isinstance(c, Mapping) else c
        for c in as_list(spec.get("containers"), "spec.containers")
    ]
    for container in containers:
        if isinstance(container, dict) and container.get("name") == NODE:
            if config.trainer_resources == "merge":
                container["resources"] = _merged(container.get("resources"), resources)
            else:
                container["resources"] = {
                    part: resources[part]
                    for part in ("limits", "requests")
                    if resources.get(part) is not None
                }
    spec["containers"] = containers
    return {**pod_template, "spec": spec}


#: A placement override for the pods of one replicatedJob: (where it was written,
#: its pod spec fields).
Override = tuple[str, Mapping[str, Any]]


def _placement_overrides(spec: Mapping[str, Any]) -> dict[str, list[Override]]:
    """Placement fields the TrainJob sets on the runtime's jobs, by replicatedJob name.

    Two API shapes exist: `podTemplateOverrides` (targetJobs + spec) and the newer
    `runtimePatches` (a JobSet-shaped patch per manager).
    """
    found: dict[str, list[Override]] = {}
    for path, raw in items_of(spec.get("podTemplateOverrides"), "spec.podTemplateOverrides"):
        body = as_mapping(raw, path, required=True)
        fields = as_mapping(body.get("spec"), field_path(path, "spec"))
        targets_path = field_path(path, "targetJobs")
        for target_path, target in items_of(body.get("targetJobs"), targets_path):
            name = as_str(as_mapping(target, target_path).get("name"), f"{target_path}.name")
            found.setdefault(name, []).append((field_path(path, "spec"), fields))
    for path, raw in items_of(spec.get("runtimePatches"), "spec.runtimePatches"):
        patch = as_mapping(raw, path, required=True)
        rspec_path = field_path(path, "trainingRuntimeSpec")
        rspec = as_mapping(patch.get("trainingRuntimeSpec"), rspec_path)
        js_path = f"{rspec_path}.template.spec"
        js = as_mapping(
            as_mapping(rspec.get("template"), f"{rspec_path}.template").get("spec"), js_path
        )
        for job_path, job in items_of(js.get("replicatedJobs"), f"{js_path}.replicatedJobs"):
            body = as_mapping(job, job_path, required=True)
            name = as_str(body.get("name"), field_path(job_path, "name"))
            pod_path = f"{job_path}.template.spec.template.spec"
            job_tmpl = as_mapping(body.get("template"), f"{job_path}.template")
            job_spec = as_mapping(job_tmpl.get("spec"), f"{job_path}.template.spec")
            pod_tmpl = as_mapping(job_spec.get("template"), f"{job_path}.template.spec.template")
            found.setdefault(name, []).append(
                (pod_path, as_mapping(pod_tmpl.get("spec"), pod_path))
            )
    return found


def _with_placement(pod_template: Mapping[str, Any], overrides: list[Override]) -> dict[str, Any]:
    """The pod template with the TrainJob's placement overrides applied.

    nodeSelector entries are merged (the override wins per key) and affinity is
    replaced, as the Trainer does. Tolerations are added to the runtime's rather
    than replacing them: the result tolerates at least what the real pod does, so
    the eligible nodes are never fewer than the scheduler's and no gang is rejected
    for a taint it actually tolerates.
    """
    spec = dict(as_mapping(pod_template.get("spec"), "spec"))
    for path, fields in overrides:
        selector = fields.get("nodeSelector")
        if selector is not None:
            merged = dict(as_mapping(spec.get("nodeSelector"), "spec.nodeSelector"))
            selector_path = field_path(path, "nodeSelector")
            for key, value in as_mapping(selector, selector_path).items():
                merged[key] = as_str(value, field_path(selector_path, str(key)))
            spec["nodeSelector"] = merged
        if fields.get("affinity") is not None:
            spec["affinity"] = as_mapping(fields["affinity"], field_path(path, "affinity"))
        tolerations = fields.get("tolerations")
        if tolerations is not None:
            spec["tolerations"] = [
                *as_list(spec.get("tolerations"), "spec.tolerations"),
                *as_list(tolerations, field_path(path, "tolerations")),
            ]
    return {**pod_template, "spec": spec}


def _keyed_by(runtime_spec: Mapping[str, Any], rt: str, prefix: str) -> str:
    """Who keys the pods when the runtime has a `podGroupPolicy`: Trainer's
    CoScheduling (or Volcano) plugin labels every pod with a PodGroup of the TrainJob's
    name and creates that PodGroup itself (v2.2.0 `pkg/runtime/framework/plugins/
    coscheduling/coscheduling.go`), whatever scheduler gangkeeper was told to use."""
    policy = as_mapping(runtime_spec.get("podGroupPolicy"), f"{rt}.podGroupPolicy")
    sources = [
        f"podGroupPolicy.{name} ({key})"
        for name, key in POD_GROUP_SOURCES.items()
        if policy.get(name) is not None
    ]
    if not sources:
        return ""
    return f"Kubeflow Trainer {' and '.join(sources)} of {prefix}"


class TrainJobRecognizer:
    name = "trainjob"
    rules = (ResourceRule("trainer.kubeflow.org", (TRAINER_VERSION,), "trainjobs", "TrainJob"),)
    follows = (
        OwnerResource(
            TRAINJOB[0], TRAINER_VERSION, "trainingruntimes", "TrainingRuntime", _RUNTIMES_WHY
        ),
        OwnerResource(
            TRAINJOB[0], TRAINER_VERSION, "clustertrainingruntimes", "ClusterTrainingRuntime",
            _RUNTIMES_WHY, namespaced=False,
        ),
    )
    pod_label_prefixes = ("trainer.kubeflow.org/",)
    # Trainer v2.2.0 `pkg/runtime/framework/plugins/jobset/jobset.go`, `Build`.
    requeue = Requeuing(
        "suspend",
        "requeue a TrainJob's gang the same way (a suspended TrainJob re-applies its JobSet "
        "suspended); patch only, get and list from the owner rule",
    )

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        if not claims(obj, TRAINJOB, (TRAINER_VERSION,)):
            return None
        gangs = self._gangs(obj, lookup, config)
        if gangs is None:
            # The TrainJob itself is being validated: say what is missing.
            _, missing = _runtime(obj, read_meta(obj).namespace, lookup)
            raise InvalidObject("spec.runtimeRef", f"{missing} not found")
        return gangs

    def _gangs(self, obj: KubeObject, lookup: OwnerLookup, config: Config) -> list[Gang] | None:
        """The TrainJob's gangs; None when its runtime is unknown to the lookup."""
        meta = read_meta(obj)
        runtime, prefix = _runtime(obj, meta.namespace, lookup)
        if runtime is None:
            return None
        rt = f"{prefix}.spec"
        spec = as_mapping(obj.get("spec"), "spec", required=True)
        trainer = as_mapping(spec.get("trainer"), "spec.trainer")
        runtime_spec = as_mapping(runtime.get("spec"), rt, required=True)
        ml_policy = as_mapping(runtime_spec.get("mlPolicy"), f"{rt}.mlPolicy")
        num_nodes = count(
            trainer.get("numNodes"),
            "spec.trainer.numNodes",
            count(ml_policy.get("numNodes"), f"{rt}.mlPolicy.numNodes", 1),
        )
        mpi = as_mapping(ml_policy.get("mpi"), f"{rt}.mlPolicy.mpi")
        launcher_is_node = mpi.get("runLauncherAsNode") is True
        resources = _resources_per_node(trainer, config)
        overrides = _placement_overrides(spec)
        template = as_mapping(runtime_spec.get("template"), f"{rt}.template", required=True)
        jobset_spec = as_mapping(template.get("spec"), f"{rt}.template.spec", required=True)
        names = {
            r.get("name")
            for r in as_list(
                jobset_spec.get("replicatedJobs"), f"{rt}.template.spec.replicatedJobs"
            )
            if isinstance(r, Mapping)
        }

        def adjust(
            name: str, job_template: Mapping[str, Any], pods: int, pod_template: Mapping[str, Any]
        ) -> tuple[int, Mapping[str, Any]]:
            job_meta = as_mapping(job_template.get("metadata"), "metadata")
            labels = as_mapping(job_meta.get("labels"), "metadata.labels")
            # Where Trainer sends resourcesPerNode (jobset/builder.go at v2.2.0).
            trainer_step = labels.get(ANCESTOR_LABEL) == "trainer" or (
                launcher_is_node and name == NODE
            )
            if name == NODE:
                pods = num_nodes - 1 if launcher_is_node and LAUNCHER in names else num_nodes
                pods = max(pods, 0)
            if trainer_step and resources is not None:
                pod_template = _with_resources(pod_template, resources, config)
            if name in overrides:
                pod_template = _with_placement(pod_template, overrides[name])
            return pods, pod_template

        template_meta = as_mapping(template.get("metadata"), f"{rt}.template.metadata")
        parts = replicated_job_parts(
            jobset_spec,
            f"{rt}.template.spec",
            config,
            adjust,
            as_mapping(template_meta.get("annotations"), f"{rt}.template.metadata.annotations"),
        )
        gang = build_gang(meta, meta.name, parts, self.name)
        if gang is None:
            return []
        keyed_by = _keyed_by(runtime_spec, rt, prefix)
        return [replace(gang, keyed_by=keyed_by) if keyed_by else gang]

    def may_claim(self, signals: PodSignals) -> bool:
        # Its TrainJob is an owner, or the owner of the pod's JobSet (an owner or
        # named by label).
        owners = signals.owners
        return TRAINJOB in owners or JOBSET in owners or bool(signals.labels.get(JOBSET_NAME_LABEL))

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        chain = owner_chain(pod, read_meta(pod).namespace, lookup)
        link = topmost(chain, {TRAINJOB}, set())
        trainjob = link.obj if link is not None else None
        if trainjob is None and link is None:
            # The Job may be unknown to the lookup; the JobSet is named on the pod.
            jobset = jobset_of_pod(pod, chain, lookup)
            owner = controller_ref(jobset) if jobset is not None else None
            if owner is not None and (group_of(owner["apiVersion"]), owner["kind"]) == TRAINJOB:
                trainjob = lookup_object(
                    lookup,
                    owner["apiVersion"],
                    owner["kind"],
                    read_meta(pod).namespace,
                    owner["name"],
                )
        if trainjob is None:
            return None
        # A pod whose TrainJob's runtime is unknown (e.g. not yet in the caller's
        # cache) cannot be sized: not a member, rather than an error about the pod.
        if type_of(trainjob) != TRAINJOB:
            return None
        return member_of(pod, self._gangs(trainjob, lookup, config) or [])
