"""PodGroup objects of Volcano and of scheduler-plugins (coscheduling), and their pods.

A PodGroup has no pod template: only `spec.minMember` and `spec.minResources` (the
total the whole group needs). The gang is one role of minMember members with no
placement constraint (checked against all nodes). Per-member demand: when a GPU
total divides evenly by minMember, each member needs total / minMember — the common
case of identical workers. When it does not divide, the members cannot be
identical and how the total splits is unknown; any split might be the one that fits,
so that resource is left out of the per-member demand (never a false rejection).
A PodGroup with minMember below 2 is not a gang.

Pods name their PodGroup with the label `scheduling.x-k8s.io/pod-group`
(scheduler-plugins) or the annotation `scheduling.k8s.io/group-name` (Volcano); the
PodGroup is looked up by that name, and without it the pod is not recognised here.

Pure: reads dicts and calls the caller's lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Gang, KubeObject, OwnerLookup, PodMembership, Role
from ..podspec import as_mapping, field_path
from ..quantity import gpu_count
from ..settings.config import Config
from .base import ResourceRule
from .common import claims, count, lookup_object, owner_gangs, read_meta

ROLE = "member"


@dataclass(frozen=True)
class PodGroupRecognizer:
    name: str
    group: str
    version: str
    #: Where a pod names its PodGroup: ("label" | "annotation", key).
    pod_key: tuple[str, str]
    #: Labels its scheduler's pods carry (`base.MarksPods`).
    pod_label_prefixes: tuple[str, ...]

    @property
    def rules(self) -> tuple[ResourceRule, ...]:
        return (ResourceRule(self.group, (self.version,), "podgroups", "PodGroup"),)

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        if not claims(obj, (self.group, "PodGroup"), (self.version,)):
            return None
        meta = read_meta(obj)
        spec = as_mapping(obj.get("spec"), "spec", required=True)
        min_member = count(spec.get("minMember"), "spec.minMember", 1)
        if min_member < 2:
            return []
        demand: dict[str, int] = {}
        resources_path = "spec.minResources"
        for resource, amount in as_mapping(spec.get("minResources"), resources_path).items():
            if not (isinstance(resource, str) and config.is_gpu_resource(resource)):
                continue
            total = gpu_count(amount, field_path(resources_path, resource))
            if total and total % min_member == 0:
                demand[resource] = total // min_member
        return [
            Gang(
                namespace=meta.namespace,
                name=meta.name,
                min_member=min_member,
                roles=(Role(ROLE, min_member, demand),),
                source=meta.source(),
                recognizer=self.name,
            )
        ]

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        meta = read_meta(pod)
        where, key = self.pod_key
        group_name = (meta.labels if where == "label" else meta.annotations).get(key, "")
        podgroup = lookup_object(
            lookup, f"{self.group}/{self.version}", "PodGroup", meta.namespace, group_name
        )
        if podgroup is None:
            return None
        gangs = owner_gangs(self, podgroup, lookup, config)
        return PodMembership(gangs[0], ROLE) if gangs else None


VOLCANO = PodGroupRecognizer(
    name="volcano-podgroup",
    group="scheduling.volcano.sh",
    version="v1beta1",
    pod_key=("annotation", "scheduling.k8s.io/group-name"),
    pod_label_prefixes=("volcano.sh/",),
)
COSCHEDULING = PodGroupRecognizer(
    name="coscheduling-podgroup",
    group="scheduling.x-k8s.io",
    version="v1alpha1",
    pod_key=("label", "scheduling.x-k8s.io/pod-group"),
    pod_label_prefixes=("scheduling.x-k8s.io/pod-group",),
)
