"""The group object each scheduler backend needs before a gang's gates are lifted.

- `coscheduling`: `scheduling.x-k8s.io/v1alpha1` PodGroup `{minMember, minResources}`;
- `volcano`: `scheduling.volcano.sh/v1beta1` PodGroup `{minMember, minResources}`;
- `native`: `scheduling.k8s.io/<served version>` PodGroup
  `{schedulingPolicy: {gang: {minCount}}, priorityClassName}`, the standalone object a
  pod's `spec.schedulingGroup.podGroupName` names (Kubernetes 1.36+, feature gate
  GenericWorkload; v1beta1 from 1.37, v1alpha3 before). kube-scheduler refuses to
  schedule a group whose priority differs from its pods' ("all pods in a single pod
  group should have the same priority as the pod group's priority",
  `pkg/scheduler/schedule_one_podgroup.go`), and the Priority admission plugin sets a
  PodGroup's priority only from its `priorityClassName`: so the group names the
  members' class;
- `gate`: none, the controller itself waits until the gang fits.

Every object is owner-referenced to the gang's top-level owner so the garbage
collector deletes it with the workload. `group_object(...)` is pure (plain dicts
out); the controller creates the object and treats "already exists" as done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cluster.observed_gangs import GangObservation
from ..dra.extended import PREFIX as DEVICE_PREFIX
from ..names import GANG_NAME_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL

#: Native group API versions, newest first; the controller uses the first one served.
NATIVE_VERSIONS: tuple[str, ...] = ("v1beta1", "v1alpha3", "v1alpha2", "v1alpha1")


@dataclass(frozen=True)
class GroupResource:
    """Where a PodGroup lives in the API: group, version, plural."""

    group: str
    version: str
    plural: str = "podgroups"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


COSCHEDULING = GroupResource("scheduling.x-k8s.io", "v1alpha1")
VOLCANO = GroupResource("scheduling.volcano.sh", "v1beta1")


def native_resource(version: str) -> GroupResource:
    return GroupResource("scheduling.k8s.io", version)


def group_name(gang: GangObservation) -> str:
    """The PodGroup name the members point at (they all point at the same one)."""
    for member in gang.members:
        if member.group_name:
            return member.group_name
    return gang.label


def min_resources(
    gang: GangObservation, served_by_devices: frozenset[str] = frozenset()
) -> dict[str, str]:
    """GPU requests of the `minMember` smallest members: the least the group needs.

    Members that arrive only after release are not among them: a scheduler waiting
    for them would wait for ever (they exist only once the others run).

    DRA devices (`dra:<class>`, gangkeeper's own name for a class's devices) are left
    out: Coscheduling's PreFilter (`CheckClusterResource`, scheduler-plugins
    pkg/coscheduling/core/core.go) sums each resource over the Nodes' allocatable,
    which never lists such a name, so the group would wait for ever. Its Filter and
    the allocator still check the devices, one member at a time. So are the
    resources in `served_by_devices`, the `extendedResourceName`s of the DeviceClasses
    known (KEP-5004): kube-scheduler serves such a request from the class's devices
    on Nodes whose allocatable lists none of it, and a sum over allocatable would
    miss those devices (on a cluster in transition, device-plugin Nodes list some:
    too few, and the group would wait for ever just the same)."""
    need = gang.needed_before_release or gang.present
    totals: dict[str, int] = {}
    smallest = sorted(gang.members, key=lambda m: sum(m.demand.values()))[:need]
    for member in smallest:
        for resource, amount in member.demand.items():
            if not resource.startswith(DEVICE_PREFIX) and resource not in served_by_devices:
                totals[resource] = totals.get(resource, 0) + amount
    return {resource: str(amount) for resource, amount in sorted(totals.items())}


def _priority_class(gang: GangObservation) -> str:
    """The members' PriorityClass name (that of the highest-priority member: members of
    one gang share one; where they do not, the scheduler refuses the group anyway)."""
    named = [m for m in gang.members if m.priority_class]
    if not named:
        return ""
    return max(named, key=lambda m: (m.priority, m.priority_class)).priority_class


def group_object(
    gang: GangObservation, resource: GroupResource,
    served_by_devices: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The PodGroup to create for `gang` in `resource`'s API group and version;
    `served_by_devices`: resources DeviceClasses serve (`min_resources`)."""
    min_member = gang.needed_before_release or gang.present
    metadata: dict[str, Any] = {
        "name": group_name(gang),
        "namespace": gang.namespace,
        "labels": {MANAGED_BY_LABEL: MANAGED_BY},
        "annotations": {GANG_NAME_ANNOTATION: gang.name},
    }
    if gang.owner is not None:
        metadata["ownerReferences"] = [gang.owner.reference()]
    if resource.group == "scheduling.k8s.io":
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_member}}}
        priority_class = _priority_class(gang)
        if priority_class:
            spec["priorityClassName"] = priority_class
    else:
        spec = {"minMember": min_member}
        wanted = min_resources(gang, served_by_devices)
        if wanted:
            spec["minResources"] = wanted
    return {
        "apiVersion": resource.api_version,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
    }
