"""gangkeeper's own annotations: `gangkeeper.io/gang-name` and `gangkeeper.io/min-member`.

On a pod template of a kind another recogniser knows (Job, JobSet, PyTorchJob, ...)
the annotations are applied by that recogniser and win over what the workload says
(`common.build_gang`). This recogniser is the fallback, asked last:
- a pod that no other recogniser claims and that carries both annotations is a
  member of that gang: this pod plus min-member - 1 members not seen (counted,
  demanding nothing, so a verdict never rests on a guess about the others);
- any other workload with a pod template (`spec.template`: Deployment, StatefulSet,
  ReplicaSet, ...) whose template carries both annotations is a gang of its
  `spec.replicas` (default 1) pods, topped up to min-member with members not seen.
One annotation without the other names no gang and is an error naming the missing key.

Pure: reads dicts; the lookup only finds a pod's top-level owner for `source`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import InvalidObject
from ..model import Gang, KubeObject, OwnerLookup, PodMembership, Role, Source
from ..names import GANG_NAME_ANNOTATION as GANG_NAME
from ..names import MIN_MEMBER_ANNOTATION as MIN_MEMBER
from ..podspec import as_mapping, field_path, other_requests, placement_of, pod_demand
from ..settings.config import Config
from .base import ResourceRule
from .common import (
    count,
    explicit_keys,
    owner_chain,
    read_meta,
    template_role,
    topology_of,
    type_of,
    with_explicit,
)

ROLE = "member"


def _both(annotations: Mapping[str, str], path: str) -> tuple[str, int] | None:
    name, min_member = explicit_keys(annotations, path)
    if name is None and min_member is None:
        return None
    if name is None or min_member is None:
        missing = GANG_NAME if name is None else MIN_MEMBER
        present = MIN_MEMBER if name is None else GANG_NAME
        raise InvalidObject(
            field_path(field_path(path, "annotations"), missing),
            f"is required when {present} is set",
        )
    return name, min_member


class AnnotationsRecognizer:
    name = "annotations"
    #: Pods and arbitrary workloads: no fixed resource list to register.
    rules: tuple[ResourceRule, ...] = ()

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        kind = type_of(obj)
        if kind is None or kind == ("", "Pod"):
            return None
        spec = obj.get("spec")
        template = spec.get("template") if isinstance(spec, Mapping) else None
        if not isinstance(template, Mapping):
            return None
        metadata = as_mapping(template.get("metadata"), "spec.template.metadata")
        annotations = as_mapping(metadata.get("annotations"), "spec.template.metadata.annotations")
        keys = _both(annotations, "spec.template.metadata")
        if keys is None:
            return None
        assert isinstance(spec, Mapping)
        meta = read_meta(obj)
        replicas = count(spec.get("replicas"), "spec.replicas", 1)
        part = template_role(ROLE, replicas, template, "spec.template", config)
        gang = Gang(
            namespace=meta.namespace,
            name=keys[0],
            min_member=keys[1],
            roles=(part.role,) if part.role.count else (),
            source=meta.source(),
            recognizer=self.name,
            topology=topology_of(part.annotations),
        )
        return [with_explicit(gang, *keys)]

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        meta = read_meta(pod)
        keys = _both(meta.annotations, "metadata")
        if keys is None:
            return None
        spec = pod.get("spec")
        chain = owner_chain(pod, meta.namespace, lookup)
        # The gang's source is the pod's top-level owner when it has one (a
        # Deployment's pods share it), else the pod itself.
        top = chain[-1] if chain else None
        source = (
            Source(top.api_version, top.kind, meta.namespace, top.name, top.uid)
            if top is not None
            else meta.source()
        )
        gang = Gang(
            namespace=meta.namespace,
            name=keys[0],
            min_member=keys[1],
            topology=topology_of(meta.annotations),
            roles=(
                Role(
                    ROLE, 1, pod_demand(spec, config), placement_of(spec),
                    requests=other_requests(spec, config),
                ),
            ),
            source=source,
            recognizer=self.name,
        )
        return PodMembership(with_explicit(gang, *keys), ROLE)
