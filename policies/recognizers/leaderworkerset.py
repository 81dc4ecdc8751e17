"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): each group of `size` pods is a gang.

A LeaderWorkerSet runs `replicas` independent groups; group i is one leader (from
`leaderTemplate`, or `workerTemplate` when absent) and size - 1 workers, and is the
gang `<lws>-<i>`. The set as a whole is not a gang: groups start and fail alone.
With `startupPolicy: LeaderReady` the workers are created only once the leader is
Ready: they are a `later` role (counted, never waited for before release).

Pods carry `leaderworkerset.sigs.k8s.io/name`, `.../group-index`, `.../worker-index`
(0 = leader) labels and the `.../size` annotation. The LeaderWorkerSet is looked up
by name (its pods hang off StatefulSets and, for workers, off the leader pod). When
the lookup does not know it, the pod's own size annotation still gives the gang:
this pod plus size - 1 members not seen. An explicit gang-name annotation is not
used here: one name for all groups would merge gangs that must stay apart.

Pure: reads dicts and calls the caller's lookup.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import InvalidObject
from ..model import Gang, KubeObject, OwnerLookup, PodMembership, Role, Source
from ..podspec import as_mapping, as_str, field_path, other_requests, placement_of, pod_demand
from ..settings.config import Config
from .base import OwnerResource, Requeuing, ResourceRule
from .common import (
    UNSEEN_ROLE,
    TemplateRole,
    build_gang,
    claims,
    count,
    count_text,
    lookup_object,
    owner_gangs,
    read_meta,
    template_role,
    with_explicit,
)

LWS = ("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
LWS_API = "leaderworkerset.x-k8s.io/v1"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LEADER, WORKER = "leader", "worker"
#: Each group is its own gang, so replicas is a count of gangs to build and check;
#: far beyond any real serving fleet, it only costs memory and time in admission.
MAX_GROUPS = 10_000


class LeaderWorkerSetRecognizer:
    name = "leaderworkerset"
    rules = (
        ResourceRule("leaderworkerset.x-k8s.io", ("v1",), "leaderworkersets", "LeaderWorkerSet"),
    )
    follows = (
        OwnerResource(
            "apps", "v1", "statefulsets", "StatefulSet",
            "objects between a pod and the workload that sizes its gang (LeaderWorkerSet -> "
            "StatefulSet -> pod; TrainJob -> (Cluster)TrainingRuntime); read-only caches, "
            "one direct get on a cache miss",
        ),
    )
    pod_label_prefixes = ("leaderworkerset.sigs.k8s.io/",)
    # The LWS controller recreates a deleted member (its StatefulSets do).
    requeue = Requeuing("recreate")

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        if not claims(obj, LWS, self.rules[0].versions):
            return None
        meta = read_meta(obj)
        spec = as_mapping(obj.get("spec"), "spec", required=True)
        replicas = count(spec.get("replicas"), "spec.replicas", 1)
        if replicas > MAX_GROUPS:
            raise InvalidObject(
                "spec.replicas", f"{replicas:,} groups is more than {MAX_GROUPS:,}; refusing it"
            )
        path = "spec.leaderWorkerTemplate"
        lwt = as_mapping(spec.get("leaderWorkerTemplate"), path, required=True)
        size = count(lwt.get("size"), field_path(path, "size"), 1)
        # Without a leaderTemplate the leader is made from the worker template.
        leader_key = "leaderTemplate" if lwt.get("leaderTemplate") is not None else "workerTemplate"
        leader = template_role(
            LEADER, min(size, 1), lwt.get(leader_key), field_path(path, leader_key), config
        )
        worker = template_role(
            WORKER,
            max(size - 1, 0),
            lwt.get("workerTemplate"),
            field_path(path, "workerTemplate"),
            config,
        )
        policy = as_str(spec.get("startupPolicy"), "spec.startupPolicy", default="")
        if policy == "LeaderReady":
            # The LWS controller creates the workers' StatefulSet only once the
            # leader is Ready (LWS v0.7.0 api/leaderworkerset/v1/leaderworkerset_types.go).
            worker = TemplateRole(
                replace(worker.role, later=True), worker.annotations, worker.path
            )
        gangs = []
        for index in range(replicas):
            gang = build_gang(meta, f"{meta.name}-{index}", [leader, worker], self.name)
            if gang is None:
                return []
            gangs.append(with_explicit(gang, f"{meta.name}-{index}", None))
        return gangs

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        meta = read_meta(pod)
        lws_name = meta.labels.get(NAME_LABEL)
        raw_index = meta.labels.get(GROUP_INDEX_LABEL)
        if not lws_name or raw_index is None:
            return None
        labels_path = "metadata.labels"
        index = count_text(raw_index, field_path(labels_path, GROUP_INDEX_LABEL))
        role = LEADER if meta.labels.get(WORKER_INDEX_LABEL, "0") == "0" else WORKER
        lws = lookup_object(lookup, LWS_API, LWS[1], meta.namespace, lws_name)
        if lws is not None:
            gangs = owner_gangs(self, lws, lookup, config) or []
            if index < len(gangs):
                return PodMembership(gangs[index], role)
            return None
        raw_size = meta.annotations.get(SIZE_ANNOTATION)
        if raw_size is None:
            return None
        size = count_text(raw_size, field_path("metadata.annotations", SIZE_ANNOTATION))
        if size < 2:
            return None
        spec = pod.get("spec")
        seen = Role(
            role, 1, pod_demand(spec, config), placement_of(spec),
            requests=other_requests(spec, config),
        )
        unseen = Role(UNSEEN_ROLE, size - 1, {})
        gang = Gang(
            namespace=meta.namespace,
            name=f"{lws_name}-{index}",
            min_member=size,
            roles=(seen, unseen),
            source=Source(LWS_API, LWS[1], meta.namespace, lws_name),
            recognizer=self.name,
        )
        return PodMembership(gang, role)
