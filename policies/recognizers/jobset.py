"""JobSet (jobset.x-k8s.io/v1alpha2): Σ replicatedJobs replicas x job parallelism.

One role per replicatedJob. A replicatedJob that another one waits for to Complete
(`dependsOn: [{name, status: Complete}]`, e.g. Trainer's dataset and model
initializers) has finished before the rest starts, so it is not part of the gang
and its pods are left alone. `replicated_job_parts` is shared with the TrainJob
recogniser, whose runtime template is a JobSet spec.

Members the JobSet controller creates only after the first ones run are `later`
roles (see `Role.later`): they count for feasibility, release never waits for them.
- a replicatedJob that depends on another's `Ready` (`dependsOn: [{status: Ready}]`);
- with `startupPolicy: {startupPolicyOrder: InOrder}`, every replicatedJob after the
  first (each one's Jobs are created once the one before is ready);
- exclusive placement (annotation `alpha.jobset.sigs.k8s.io/exclusive-topology` on
  the JobSet or a replicatedJob's Job template, without `.../node-selector`): JobSet
  v0.11.1's pod webhook (`pkg/webhooks/pod_admission_webhook.go`) refuses every pod
  whose `batch.kubernetes.io/job-completion-index` is not "0" until the index-0
  leader of its Job has a node, so each replicatedJob is a role of its leaders
  (`replicas` pods) and a later role `<name>-followers` of the rest.

Pure: reads dicts and calls the caller's lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..errors import InvalidObject
from ..model import Gang, KubeObject, OwnerLookup, PodMembership
from ..podspec import as_mapping, as_str, field_path
from ..settings.config import Config
from .base import PodSignals, Requeuing, ResourceRule
from .common import (
    Link,
    TemplateRole,
    build_gang,
    claims,
    controller_ref,
    count,
    group_of,
    items_of,
    lookup_object,
    owner_chain,
    owner_gangs,
    read_meta,
    role_named,
    template_role,
)
from .job import job_pods

JOBSET = ("jobset.x-k8s.io", "JobSet")
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
TRAINJOB = ("trainer.kubeflow.org", "TrainJob")
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
EXCLUSIVE_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY_ANNOTATION = "alpha.jobset.sigs.k8s.io/node-selector"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
#: Suffix of the later role of an exclusive-placement replicatedJob's followers.
FOLLOWERS = "-followers"

#: (replicatedJob name, its Job template, pods it would run, pod template) →
#: (pods, pod template): how the TrainJob recogniser applies numNodes and
#: resourcesPerNode to the runtime's template before roles are built.
Adjust = Callable[[str, Mapping[str, Any], int, Mapping[str, Any]], tuple[int, Mapping[str, Any]]]


def _dependencies(replicated: list[tuple[str, Any]]) -> tuple[set[str], set[str]]:
    """(names some other replicatedJob waits for to Complete, names of replicatedJobs
    that wait for another one to be Ready)."""
    before: set[str] = set()
    after_ready: set[str] = set()
    for path, item in replicated:
        body = as_mapping(item, path, required=True)
        for dep_path, dep in items_of(body.get("dependsOn"), field_path(path, "dependsOn")):
            dep_body = as_mapping(dep, dep_path, required=True)
            status = as_str(dep_body.get("status"), field_path(dep_path, "status"), default="")
            if status == "Complete":
                before.add(as_str(dep_body.get("name"), field_path(dep_path, "name")))
            elif status == "Ready":
                after_ready.add(as_str(body.get("name"), field_path(path, "name")))
    return before, after_ready


def _exclusive(annotations: Mapping[str, Any]) -> bool:
    return EXCLUSIVE_ANNOTATION in annotations and (
        NODE_SELECTOR_STRATEGY_ANNOTATION not in annotations
    )


def _later(part: TemplateRole) -> TemplateRole:
    return TemplateRole(replace(part.role, later=True), part.annotations, part.path)


def replicated_job_parts(
    spec: Mapping[str, Any],
    path: str,
    config: Config,
    adjust: Adjust | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> list[TemplateRole]:
    """One role per replicatedJob of a JobSet spec at `path` (two with exclusive
    placement); `annotations` are the JobSet's own."""
    replicated = items_of(spec.get("replicatedJobs"), field_path(path, "replicatedJobs"))
    if not replicated:
        raise InvalidObject(
            field_path(path, "replicatedJobs"), "must list at least one replicatedJob"
        )
    skip, after_ready = _dependencies(replicated)
    startup = as_mapping(spec.get("startupPolicy"), field_path(path, "startupPolicy"))
    order_path = field_path(field_path(path, "startupPolicy"), "startupPolicyOrder")
    in_order = as_str(startup.get("startupPolicyOrder"), order_path, default="") == "InOrder"
    jobset_exclusive = _exclusive(annotations or {})
    first = True
    parts: list[TemplateRole] = []
    for item_path, item in replicated:
        body = as_mapping(item, item_path, required=True)
        name = as_str(body.get("name"), field_path(item_path, "name"))
        replicas = count(body.get("replicas"), field_path(item_path, "replicas"), 1)
        job_path = field_path(item_path, "template")
        job_template = as_mapping(body.get("template"), job_path, required=True)
        job_spec_path = field_path(job_path, "spec")
        job_spec = as_mapping(job_template.get("spec"), job_spec_path, required=True)
        pod_path = field_path(job_spec_path, "template")
        pod_template = as_mapping(job_spec.get("template"), pod_path, required=True)
        pods = job_pods(job_spec, job_spec_path)
        if adjust is not None:
            pods, pod_template = adjust(name, job_template, pods, pod_template)
        if name in skip:
            continue
        later = name in after_ready or (in_order and not first)
        first = False
        job_meta = as_mapping(job_template.get("metadata"), field_path(job_path, "metadata"))
        job_annotations = as_mapping(
            job_meta.get("annotations"), field_path(job_path, "metadata.annotations")
        )
        exclusive = pods > 1 and (jobset_exclusive or _exclusive(job_annotations))
        leaders = replicas if exclusive else replicas * pods
        part = template_role(name, leaders, pod_template, pod_path, config)
        parts.append(_later(part) if later else part)
        if exclusive:
            followers = template_role(
                name + FOLLOWERS, replicas * (pods - 1), pod_template, pod_path, config
            )
            parts.append(_later(followers))
    return parts


def member_of(pod: KubeObject, gangs: list[Gang]) -> PodMembership | None:
    """The pod's role is its replicatedJob, named by the label the JobSet controller sets."""
    if not gangs:
        return None
    meta = read_meta(pod)
    name = meta.labels.get(REPLICATED_JOB_LABEL, "")
    if meta.annotations.get(COMPLETION_INDEX_ANNOTATION, "0") != "0":
        # An exclusive-placement follower, if its replicatedJob has followers.
        follower = role_named(gangs[0], name + FOLLOWERS)
        if follower is not None:
            return PodMembership(gangs[0], follower)
    role = role_named(gangs[0], name)
    return PodMembership(gangs[0], role) if role is not None else None


def jobset_of_pod(
    pod: KubeObject, chain: tuple[Link, ...], lookup: OwnerLookup
) -> KubeObject | None:
    """The pod's JobSet: through its owners, or by the jobset-name label it carries."""
    link = next((lk for lk in chain if (lk.group, lk.kind) == JOBSET), None)
    if link is not None and link.obj is not None:
        return link.obj
    meta = read_meta(pod)
    return lookup_object(
        lookup, JOBSET_API, "JobSet", meta.namespace, meta.labels.get(JOBSET_NAME_LABEL, "")
    )


class JobSetRecognizer:
    name = "jobset"
    rules = (ResourceRule("jobset.x-k8s.io", ("v1alpha2",), "jobsets", "JobSet"),)
    pod_label_prefixes = ("jobset.sigs.k8s.io/",)
    # JobSet v0.11.1 `suspendJobs` (pkg/controllers/jobset_controller.go).
    requeue = Requeuing(
        "suspend",
        "requeue a JobSet's gang the same way (a suspended JobSet suspends its Jobs, whose "
        "pods the Job controller deletes uncounted); patch only, get and list from the "
        "owner rule",
    )

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        if not claims(obj, JOBSET, self.rules[0].versions):
            return None
        meta = read_meta(obj)
        spec = as_mapping(obj.get("spec"), "spec", required=True)
        parts = replicated_job_parts(spec, "spec", config, annotations=meta.annotations)
        gang = build_gang(meta, meta.name, parts, self.name)
        return [gang] if gang is not None else []

    def may_claim(self, signals: PodSignals) -> bool:
        return JOBSET in signals.owners or bool(signals.labels.get(JOBSET_NAME_LABEL))

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        chain = owner_chain(pod, read_meta(pod).namespace, lookup)
        if any((lk.group, lk.kind) == TRAINJOB for lk in chain):
            return None
        jobset = jobset_of_pod(pod, chain, lookup)
        if jobset is None:
            return None
        # A JobSet made by a TrainJob is the TrainJob's gang.
        owner = controller_ref(jobset)
        if owner is not None and (group_of(owner["apiVersion"]), owner["kind"]) == TRAINJOB:
            return None
        return member_of(pod, owner_gangs(self, jobset, lookup, config) or [])
