"""What a gang pod should look like after admission: the mutation plan per backend.

`plan_pod(pod, membership, config, namespace)` says which labels, annotations,
schedulerName, scheduling gate and (native backend) `spec.schedulingGroup` a pod of a
gang gets, following docs/internals.md ("What a gang pod carries") and the
backend table of docs/configuration.md. `MutationPlan.apply(pod)` returns the pod as it should
look (new containers on the changed paths, the rest shared with the input, so read
only), and `MutationPlan.json_patch(pod)` the RFC 6902 operations that make it so,
which is what the webhook sends (built from the plan, not by diffing the two pods).

Rules:
- only absent keys are added: a value the user set is never overwritten, so planning
  on an already mutated pod adds nothing (idempotent);
- a pod that carries another gang system's keys (Kueue, Volcano, scheduler-plugins
  coscheduling, YuniKorn, a native scheduling group of another name) or a foreign
  `schedulerName` is left alone: skipped or rejected per `config.on_conflict`, with a
  message naming the keys found; so is a member of a gang another system keys
  itself (`Gang.keyed_by`: a Trainer runtime's podGroupPolicy), even where that
  system's key and value are the ones this backend would write;
- a pod already bound (`spec.nodeName`) cannot take a scheduling gate and is skipped;
- label values are valid (≤ 63 characters, alphanumeric ends); the gang's value is
  also a DNS subdomain, as PodGroup names must be. Long or odd names get a stable
  hash suffix (`label_value`, `group_name`).

Pure: dicts in, a frozen plan and a new dict out; no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..model import JSON_OBJECT, Backend, Gang, KubeObject, PodMembership
from ..names import (
    BACKEND_ANNOTATION,
    COSCHEDULING_GROUP_LABEL,
    GANG_LABEL,
    GANG_NAME_ANNOTATION,
    GATE,
    LATER_ANNOTATION,
    MIN_MEMBER_ANNOTATION,
    OWNER_ANNOTATION,
    ROLE_LABEL,
    VOLCANO_GROUP_ANNOTATION,
)
from ..settings.config import Config

DEFAULT_SCHEDULER = "default-scheduler"

#: Keys by which other gang systems mark their pods: (system, where, key or prefix).
#: A trailing "/" matches every key under that prefix.
FOREIGN_KEYS: tuple[tuple[str, str, str], ...] = (
    ("Kueue", "label", "kueue.x-k8s.io/pod-group-name"),
    ("Kueue", "annotation", "kueue.x-k8s.io/pod-group-total-count"),
    ("Volcano", "annotation", VOLCANO_GROUP_ANNOTATION),
    ("Volcano", "label", VOLCANO_GROUP_ANNOTATION),
    ("Volcano", "annotation", "volcano.sh/"),
    ("Volcano", "label", "volcano.sh/"),
    ("Volcano", "annotation", "scheduling.volcano.sh/"),
    ("Volcano", "label", "scheduling.volcano.sh/"),
    ("scheduler-plugins", "label", COSCHEDULING_GROUP_LABEL),
    ("scheduler-plugins", "label", "pod-group.scheduling.sigs.k8s.io"),
    ("YuniKorn", "annotation", "yunikorn.apache.org/task-group-name"),
    ("YuniKorn", "annotation", "yunikorn.apache.org/task-groups"),
    ("YuniKorn", "annotation", "yunikorn.apache.org/app-id"),
    ("YuniKorn", "label", "yunikorn.apache.org/app-id"),
    ("YuniKorn", "label", "applicationId"),
)

_EXACT_KEYS: dict[tuple[str, str], str] = {
    (where, key): system for system, where, key in FOREIGN_KEYS if not key.endswith("/")
}
_PREFIX_KEYS: tuple[tuple[str, str, str], ...] = tuple(
    (where, key, system) for system, where, key in FOREIGN_KEYS if key.endswith("/")
)

_PREFIXES_OF: dict[str, tuple[str, ...]] = {
    where: tuple(key for w, key, _ in _PREFIX_KEYS if w == where)
    for where in ("label", "annotation")
}

_MAX_LABEL = 63
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_HASH_CHARS = 8

Outcome = Literal["mutate", "unchanged", "skip", "reject"]


def _shortened(name: str, invalid: str, ends: str) -> str:
    """A readable prefix of `name` plus 8 hex digits of its SHA-256 (stable, distinct)."""
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_CHARS]
    prefix = re.sub(invalid, "-", name)[: _MAX_LABEL - _HASH_CHARS - 1]
    prefix = re.sub(rf"^[^{ends}]+|[^{ends}]+$", "", prefix)
    return f"{prefix}-{digest}" if prefix else digest


def label_value(name: str) -> str:
    """`name` if it is a valid label value, else a stable shortened form that is."""
    if len(name) <= _MAX_LABEL and _LABEL_VALUE.fullmatch(name):
        return name
    return _shortened(name, r"[^-A-Za-z0-9_.]", "A-Za-z0-9")


def group_name(name: str) -> str:
    """The gang's label value and PodGroup name: a valid label value that is also a
    lowercase DNS subdomain (as PodGroup names must be), shortened with a stable hash
    suffix when `name` is not one already."""
    if len(name) <= _MAX_LABEL and _DNS_NAME.fullmatch(name):
        return name
    return _shortened(name.lower(), r"[^-a-z0-9.]", "a-z0-9")


@dataclass(frozen=True)
class MutationPlan:
    """The additions one pod needs; empty mappings/None mean nothing to add."""

    outcome: Outcome
    backend: Backend
    #: Why the pod is skipped or rejected (names the keys found); "" otherwise.
    message: str = ""
    #: The gang system a skipped pod is left to, with its key ("kueue (label
    #: kueue.x-k8s.io/pod-group-name=x)"); "" when no other system gangs it.
    left_to: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None
    add_gate: bool = False
    #: Native backend: `spec.schedulingGroup.podGroupName` to set.
    pod_group_name: str | None = None

    @property
    def changes(self) -> bool:
        return self.outcome == "mutate"

    def apply(self, pod: KubeObject) -> dict[str, Any]:
        """The pod as it should look after the plan's additions; `pod` is untouched.

        Only the containers on the path of a change are new: the top-level dict,
        `metadata`, its `labels`/`annotations`, `spec` and `spec.schedulingGates`.
        Everything else (containers, volumes, ...) is shared with `pod`, because a
        full copy of a large pod was a fifth of /mutate's time. The result is read
        only: a caller that wants to edit it must copy it first; with nothing to
        change it is a shallow copy. (The webhook sends `json_patch`, which makes the
        same pod from the request's.)
        """
        if not self.changes:
            return dict(pod)
        result: dict[str, Any] = dict(pod)
        # A value that is not a mapping cannot hold keys; the API server would refuse
        # it anyway, so it is replaced rather than crashed on (metadata, labels,
        # annotations, spec alike).
        if self.labels or self.annotations:
            metadata = result.get("metadata")
            metadata = dict(metadata) if isinstance(metadata, JSON_OBJECT) else {}
            result["metadata"] = metadata
            for where, additions in (("labels", self.labels), ("annotations", self.annotations)):
                if not additions:
                    continue
                have = metadata.get(where)
                have = have if isinstance(have, JSON_OBJECT) else {}
                metadata[where] = {**have, **{k: v for k, v in additions.items() if k not in have}}
        spec = result.get("spec")
        result["spec"] = self._spec_additions(
            dict(spec) if isinstance(spec, JSON_OBJECT) else {}
        )
        return result

    def json_patch(self, pod: KubeObject) -> list[dict[str, Any]]:
        """RFC 6902 operations that turn `pod` into `self.apply(pod)`; [] with no changes.

        Built from the plan, without building the planned pod or diffing: this runs on
        every admission. Keys are escaped as RFC 6901 says; a map that is absent (or of
        the wrong type) is set whole, one that holds keys gets one `add` per new key (so
        another webhook's keys are never rewritten), and a gate is appended at the
        list's end. The tests apply these operations and compare with `apply` for pods
        with absent, empty and wrongly typed parts.
        """
        if not self.changes:
            return []
        ops: list[dict[str, Any]] = []
        metadata = pod.get("metadata", _ABSENT)
        if not isinstance(metadata, JSON_OBJECT):
            fresh = {
                where: dict(additions)
                for where, additions in (("labels", self.labels), ("annotations", self.annotations))
                if additions
            }
            if fresh:
                ops.append(_set("/metadata", metadata, fresh))
        else:
            for where, additions in (("labels", self.labels), ("annotations", self.annotations)):
                if not additions:
                    continue
                have = metadata.get(where, _ABSENT)
                if isinstance(have, JSON_OBJECT):
                    ops.extend(
                        {"op": "add", "path": _pointer(f"/metadata/{where}", key), "value": value}
                        for key, value in additions.items()
                        if key not in have
                    )
                else:
                    ops.append(_set(f"/metadata/{where}", have, dict(additions)))
        spec = pod.get("spec", _ABSENT)
        if not isinstance(spec, JSON_OBJECT):
            ops.append(_set("/spec", spec, self._spec_additions({})))
            return ops
        if self.scheduler_name is not None:
            before = spec.get("schedulerName", _ABSENT)
            if before != self.scheduler_name:
                ops.append(_set("/spec/schedulerName", before, self.scheduler_name))
        if self.add_gate:
            gates = spec.get("schedulingGates", _ABSENT)
            if not isinstance(gates, list):
                ops.append(_set("/spec/schedulingGates", gates, [{"name": GATE}]))
            elif not has_gate(gates):
                # Appended: earlier gates (another webhook's) stay where they are.
                ops.append(
                    {"op": "add", "path": f"/spec/schedulingGates/{len(gates)}",
                     "value": {"name": GATE}}
                )
        if self.pod_group_name is not None and not spec.get("schedulingGroup"):
            ops.append(
                _set("/spec/schedulingGroup", spec.get("schedulingGroup", _ABSENT),
                     {"podGroupName": self.pod_group_name})
            )
        return ops

    def _spec_additions(self, spec: dict[str, Any]) -> dict[str, Any]:
        """`spec` (a fresh dict) with the plan's spec fields set, as `apply` sets them."""
        if self.scheduler_name is not None:
            spec["schedulerName"] = self.scheduler_name
        if self.add_gate:
            gates = spec.get("schedulingGates")
            gates = list(gates) if isinstance(gates, list) else []
            if not has_gate(gates):
                gates.append({"name": GATE})
            spec["schedulingGates"] = gates
        if self.pod_group_name is not None and not spec.get("schedulingGroup"):
            spec["schedulingGroup"] = {"podGroupName": self.pod_group_name}
        return spec


def has_gate(gates: list[Any]) -> bool:
    """Whether gangkeeper's scheduling gate is among `gates`."""
    return any(isinstance(g, JSON_OBJECT) and g.get("name") == GATE for g in gates)


def _pointer(parent: str, key: str) -> str:
    # RFC 6901: "~" and "/" inside a key become "~0" and "~1" (in that order).
    return f"{parent}/{key.replace('~', '~0').replace('/', '~1')}"


def _set(path: str, before: Any, value: Any) -> dict[str, Any]:
    """`add` where nothing was, `replace` where something (of the wrong type) was."""
    return {"op": "add" if before is _ABSENT else "replace", "path": path, "value": value}


#: Marks a key that is absent (None is a value a pod may carry).
_ABSENT: Any = object()


def foreign_keys(
    pod: KubeObject, *, ours: Mapping[tuple[str, str], str] | None = None
) -> list[str]:
    """Another gang system's keys on the pod, as "System label key=value" texts.

    `ours` maps (where, key) to the value this backend itself writes: a key holding
    exactly that value is our own earlier mutation (or the user agreeing with it),
    not a conflict.
    """
    metadata = pod.get("metadata") if isinstance(pod, JSON_OBJECT) else None
    metadata = metadata if isinstance(metadata, JSON_OBJECT) else {}
    found: list[str] = []
    ours = ours or {}
    for where, raw in (
        ("label", metadata.get("labels")),
        ("annotation", metadata.get("annotations")),
    ):
        if not isinstance(raw, JSON_OBJECT):
            continue
        prefixes = _PREFIXES_OF[where]
        # Read in place rather than through a filtered copy: this runs
        # for every admitted pod. Non-string keys or values are not keys of anyone.
        for key, value in raw.items():
            if not (isinstance(key, str) and isinstance(value, str)):
                continue
            system = _EXACT_KEYS.get((where, key))
            # startswith(tuple) is one C call; most keys match no prefix at all.
            if system is None and key.startswith(prefixes):
                system = next(
                    (sy for w, prefix, sy in _PREFIX_KEYS if w == where and key.startswith(prefix)),
                    None,
                )
            if system is None or ours.get((where, key)) == value:
                continue
            found.append(f"{system} {where} {key}={value}")
    spec = pod.get("spec") if isinstance(pod, JSON_OBJECT) else None
    spec = spec if isinstance(spec, JSON_OBJECT) else {}
    group = spec.get("schedulingGroup")
    if group:
        name = group.get("podGroupName") if isinstance(group, JSON_OBJECT) else None
        if ours.get(("spec", "schedulingGroup")) != name:
            found.append(f"native spec.schedulingGroup.podGroupName={name}")
    if spec.get("workloadRef"):
        found.append("native spec.workloadRef")
    return found


def later_json(gang: Gang) -> str:
    """The later-members annotation value of a gang (see LATER_ANNOTATION)."""
    entries = []
    for role in gang.roles:
        if role.later and role.count:
            entry: dict[str, Any] = {"count": role.count, "demand": dict(role.demand)}
            if role.placement.node_selector:
                entry["nodeSelector"] = dict(role.placement.node_selector)
            entries.append(entry)
    return json.dumps(entries, separators=(",", ":"), sort_keys=True)


def _owner_json(membership: PodMembership) -> str:
    """The owner annotation's JSON (the same for every pod of a gang: plans are
    remembered per pod shape by the decider's `PlanMemo`)."""
    source = membership.gang.source
    return json.dumps(
        {
            "apiVersion": source.api_version,
            "kind": source.kind,
            "name": source.name,
            "uid": source.uid,
        },
        separators=(",", ":"),
    )


def plan_pod(
    pod: KubeObject, membership: PodMembership, config: Config, namespace: str
) -> MutationPlan:
    """The additions that make `pod` a member of its gang under the chosen backend.

    Scheduling gates can only be added when a pod is created; the webhook calls this
    on CREATE. Never raises on odd metadata: unreadable fields count as absent.
    """
    backend = config.backend_for(namespace)
    gang = membership.gang
    group = group_name(gang.name)
    metadata = pod.get("metadata") if isinstance(pod, JSON_OBJECT) else None
    metadata = metadata if isinstance(metadata, JSON_OBJECT) else {}
    spec = pod.get("spec") if isinstance(pod, JSON_OBJECT) else None
    spec = spec if isinstance(spec, JSON_OBJECT) else {}

    ours: dict[tuple[str, str], str] = {}
    if backend == "coscheduling":
        ours[("label", COSCHEDULING_GROUP_LABEL)] = group
    elif backend == "volcano":
        ours[("annotation", VOLCANO_GROUP_ANNOTATION)] = group
    elif backend == "native":
        ours[("spec", "schedulingGroup")] = group

    def refuse(message: str, left_to: str = "") -> MutationPlan:
        outcome: Outcome = "reject" if config.on_conflict == "reject" else "skip"
        return MutationPlan(outcome=outcome, backend=backend, message=message, left_to=left_to)

    # A gang another system keys (Trainer's podGroupPolicy) is theirs even where its
    # key happens to be ours, value included: Trainer names its PodGroup after the
    # TrainJob, as gangkeeper's coscheduling backend does.
    found = foreign_keys(pod, ours={} if gang.keyed_by else ours)
    if gang.keyed_by:
        found.append(gang.keyed_by)
    if found:
        # keyed_by already reads "<system> (<key>)"; a found key reads "<system> <key>".
        system, _, key = found[0].partition(" ")
        return refuse(
            f"pod already belongs to another gang system ({'; '.join(found)}); "
            f"gangkeeper does not gang it twice",
            gang.keyed_by or f"{system} ({key})",
        )
    wanted_scheduler = config.scheduler_name_for(backend)
    current_scheduler = spec.get("schedulerName")
    scheduler: str | None = None
    if current_scheduler in (None, "", DEFAULT_SCHEDULER):
        if wanted_scheduler != (current_scheduler or DEFAULT_SCHEDULER):
            scheduler = wanted_scheduler
    elif current_scheduler != wanted_scheduler:
        return refuse(
            f"pod uses scheduler {current_scheduler!r}, not {wanted_scheduler!r} as the "
            f"{backend} backend needs (foreign scheduler)"
        )
    if spec.get("nodeName"):
        return MutationPlan(
            outcome="skip",
            backend=backend,
            message=f"pod is already bound to node {spec.get('nodeName')}; "
            "a scheduling gate cannot be added",
        )

    wanted_labels = {GANG_LABEL: group, ROLE_LABEL: label_value(membership.role)}
    wanted_annotations = {
        MIN_MEMBER_ANNOTATION: str(gang.min_member),
        GANG_NAME_ANNOTATION: gang.name,
        OWNER_ANNOTATION: _owner_json(membership),
        BACKEND_ANNOTATION: backend,
    }
    if gang.later_members:
        wanted_annotations[LATER_ANNOTATION] = later_json(gang)
    if backend == "coscheduling":
        wanted_labels[COSCHEDULING_GROUP_LABEL] = group
    elif backend == "volcano":
        wanted_annotations[VOLCANO_GROUP_ANNOTATION] = group
    # Any key already present is the user's (or ours from before): never overwrite it,
    # even when its value is not a string.
    raw_labels, raw_annotations = metadata.get("labels"), metadata.get("annotations")
    present_labels = set(raw_labels) if isinstance(raw_labels, JSON_OBJECT) else set()
    present_annotations = (
        set(raw_annotations) if isinstance(raw_annotations, JSON_OBJECT) else set()
    )
    labels = {k: v for k, v in wanted_labels.items() if k not in present_labels}
    annotations = {k: v for k, v in wanted_annotations.items() if k not in present_annotations}
    gates = spec.get("schedulingGates")
    gated = isinstance(gates, list) and has_gate(gates)
    pod_group = group if backend == "native" and not spec.get("schedulingGroup") else None
    plan = MutationPlan(
        outcome="mutate",
        backend=backend,
        labels=labels,
        annotations=annotations,
        scheduler_name=scheduler,
        add_gate=not gated,
        pod_group_name=pod_group,
    )
    if not (labels or annotations or scheduler or plan.add_gate or pod_group):
        return MutationPlan(outcome="unchanged", backend=backend)
    return plan
