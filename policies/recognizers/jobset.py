"""JobSet (jobset.x-k8s.io/v1alpha2): Σ replicatedJobs replicas x job parallelism.

One role per replicatedJob. A replicatedJob that another one waits for to Complete
(`dependsOn: [{name, status: Complete}]`, e.g. Trainer's dataset and model
initializers) has finished before the rest starts, so it is not part of the gang
and its pods are left alone. `replicated_job_parts` is shared with the TrainJob
recogniser, whose runtime template is a JobSet spec.

Pure: reads dicts and calls the caller's lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..config import Config
from ..errors import InvalidObject
from ..model import Gang, KubeObject, OwnerLookup, PodMembership
from ..podspec import as_mapping, as_str, field_path
from .base import PodSignals, ResourceRule
from .common import (
    Link,
    TemplateRole,
    build_gang,
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
    type_of,
)
from .job import job_pods

JOBSET = ("jobset.x-k8s.io", "JobSet")
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
TRAINJOB = ("trainer.kubeflow.org", "TrainJob")
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"

#: (replicatedJob name, its Job template, pods it would run, pod template) →
#: (pods, pod template): how the TrainJob recogniser applies numNodes and
#: resourcesPerNode to the runtime's template before roles are built.
Adjust = Callable[[str, Mapping[str, Any], int, Mapping[str, Any]], tuple[int, Mapping[str, Any]]]


def _completed_first(replicated: list[tuple[str, Any]]) -> set[str]:
    """Names of replicatedJobs some other replicatedJob waits for to Complete."""
    before: set[str] = set()
    for path, item in replicated:
        body = as_mapping(item, path, required=True)
        for dep_path, dep in items_of(body.get("dependsOn"), field_path(path, "dependsOn")):
            dep_body = as_mapping(dep, dep_path, required=True)
            status = as_str(dep_body.get("status"), field_path(dep_path, "status"), default="")
            if status == "Complete":
                before.add(as_str(dep_body.get("name"), field_path(dep_path, "name")))
    return before


def replicated_job_parts(
    spec: Mapping[str, Any], path: str, config: Config, adjust: Adjust | None = None
) -> list[TemplateRole]:
    """One role per replicatedJob of a JobSet spec at `path`."""
    replicated = items_of(spec.get("replicatedJobs"), field_path(path, "replicatedJobs"))
    if not replicated:
        raise InvalidObject(
            field_path(path, "replicatedJobs"), "must list at least one replicatedJob"
        )
    skip = _completed_first(replicated)
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
        parts.append(template_role(name, replicas * pods, pod_template, pod_path, config))
    return parts


def member_of(pod: KubeObject, gangs: list[Gang]) -> PodMembership | None:
    """The pod's role is its replicatedJob, named by the label the JobSet controller sets."""
    if not gangs:
        return None
    labels = read_meta(pod).labels
    role = role_named(gangs[0], labels.get(REPLICATED_JOB_LABEL, ""))
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

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        if type_of(obj) != JOBSET:
            return None
        meta = read_meta(obj)
        spec = as_mapping(obj.get("spec"), "spec", required=True)
        gang = build_gang(meta, meta.name, replicated_job_parts(spec, "spec", config), self.name)
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
