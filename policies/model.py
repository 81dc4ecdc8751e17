"""The shapes every part of the policy core speaks: gangs, roles, placement, verdicts.

Pure data: frozen dataclasses built from plain dicts by the recognisers and read by
capacity, feasibility and mutation. Nothing here parses Kubernetes objects, does I/O
or knows about HTTP; this module imports nothing from the rest of the package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

#: A Kubernetes object as the API server sends it: a JSON object, never a typed model.
KubeObject = Mapping[str, Any]

#: A key of a Node's `status` as gangkeeper's device view passes the Node on (never one
#: the API server sends): GPUs of each resource that allocated ResourceClaims take on
#: the node with no bound pod counting them (`dra.allocated`). The controller counts
#: them as used; "could ever run" does not.
HELD_BY_CLAIMS = "gangkeeper.io/heldByClaims"
#: Before a DeviceClass's name in the resource its devices are counted as on a Node
#: (`dra.resource_names`; a declared pool's `devices`, `settings.config`).
DEVICE_RESOURCE_PREFIX = "dra:"
#: After a class's name (`dra:<class>/all`): the one "whole node" of the class a Node
#: offers, which a request of `allocationMode: All` takes (`dra.resource_names`,
#: `assigner.whole_nodes`).
WHOLE_NODE_SUFFIX = "/all"
#: Between a class's name and the hash of a request's own selectors
#: (`dra:<class>#<hash>`: the devices of the class those selectors accept;
#: `dra.resource_names`, `assigner.whole_nodes`).
NARROWED_MARK = "#"

#: For `isinstance(value, JSON_OBJECT)`: true for any Mapping, like `isinstance(value,
#: Mapping)`, but a dict (every object decoded from JSON) is answered by a C type
#: check before the ABC's Python-level `__instancecheck__` is reached: 40 ns rather
#: than 200, dozens of times per admission.
JSON_OBJECT = (dict, Mapping)

#: Given (apiVersion, kind, namespace, name) return the object, or None when unknown.
#: The webhook answers from its watch-fed caches; `gangkeeper check` from the files it
#: was given; tests from a dict. It must not block on the network.
OwnerLookup = Callable[[str, str, str, str], KubeObject | None]

#: Given (namespace, gang name) return the pods seen that name that gang: by the
#: annotation `gangkeeper.io/gang-name` or the label `kueue.x-k8s.io/pod-group-name`.
#: The webhook answers from its cache of gang pods, `gangkeeper check` from its files.
#: Candidates only: the policy keeps those its recogniser puts in the same gang. It
#: must not block on the network.
PodsLookup = Callable[[str, str], Sequence[KubeObject]]

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


@dataclass(frozen=True)
class Requirement:
    """One node selector requirement (matchExpressions or matchFields entry)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeSelectorTerm:
    """Requirements ANDed together; a node matches when every one holds."""

    match_expressions: tuple[Requirement, ...] = ()
    #: Only `metadata.name` is a supported field, as in the scheduler.
    match_fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = ""
    #: Empty means every effect.
    effect: str = ""


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Placement:
    """The hard constraints that limit which nodes a pod may use.

    Soft preferences (preferred affinity, PreferNoSchedule) never appear here: they
    cannot make a gang impossible.
    """

    node_selector: tuple[tuple[str, str], ...] = ()
    #: requiredDuringSchedulingIgnoredDuringExecution terms, ORed. Empty = no constraint.
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def __hash__(self) -> int:
        # Placements key every eligibility cache, looked up thousands of times a
        # planning pass, and a frozen dataclass hashes all its fields again on each
        # lookup: computed once. (Equality stays the fields'; see __getstate__.)
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.node_selector, self.required_terms, self.tolerations))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict[str, object]:
        # A string's hash differs from process to process: never carry it along.
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


@dataclass(frozen=True)
class Role:
    """A set of identical members of a gang: same demand, same placement."""

    name: str
    count: int
    #: Effective per-pod request of each GPU resource, whole numbers, zeros omitted.
    demand: Mapping[str, int]
    placement: Placement = field(default_factory=Placement)
    #: Members created only after the gang is released, because their controller
    #: waits for the first members to run: a step that depends on another's Ready
    #: (JobSet `dependsOn` Ready), JobSet `startupPolicy: InOrder`, LeaderWorkerSet
    #: `startupPolicy: LeaderReady` workers, JobSet exclusive-placement followers.
    #: They count for feasibility like any member; release never waits for them, and
    #: their room is held until they arrive.
    later: bool = False
    #: Effective per-pod requests of the other resources the scheduler checks (cpu in
    #: millicores, memory and ephemeral-storage in bytes), zeros omitted.
    requests: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Source:
    """The object a gang was recognised from (a pod's top-level owner, or the object)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True)
class Gang:
    """A set of pods that must run all at once or not at all."""

    namespace: str
    name: str
    #: How many members must be placed together; ≤ the sum of role counts.
    min_member: int
    roles: tuple[Role, ...]
    source: Source
    #: Which recogniser produced this gang (registry name), for messages and metrics.
    recognizer: str = ""
    #: ("required" | "preferred", node label key) from the topology annotations.
    topology: tuple[str, ...] = ()
    #: Another gang system that keys this gang's pods itself, in words for messages
    #: (a Trainer runtime's `podGroupPolicy`); "" when none. Its pods are skipped or
    #: refused like pods carrying another system's keys, whatever their values.
    keyed_by: str = ""

    @property
    def size(self) -> int:
        return sum(role.count for role in self.roles)

    @property
    def later_members(self) -> int:
        """Members that can only exist after the gang is released (`Role.later`)."""
        return sum(role.count for role in self.roles if role.later)

    @property
    def needed_before_release(self) -> int:
        """Members that must exist before release: minMember less those that only
        come after it (at least one: something must start the gang)."""
        return max(1, self.min_member - self.later_members)

    def min_member_demand(self) -> dict[str, int]:
        """The demand of the minMember members a verdict is about: all members when
        minMember is the size, else the cheapest minMember of them (fewest GPUs per
        member first), as feasibility checks them."""
        left = self.min_member
        total: dict[str, int] = {}
        for role in sorted(self.roles, key=lambda r: sum(r.demand.values())):
            take = min(left, role.count)
            for resource, amount in role.demand.items():
                if amount and take:
                    total[resource] = total.get(resource, 0) + amount * take
            left -= take
            if left <= 0:
                break
        return total

    def total_demand(self) -> dict[str, int]:
        """Sum of every member's demand per resource; resources never mixed."""
        total: dict[str, int] = {}
        for role in self.roles:
            for resource, amount in role.demand.items():
                total[resource] = total.get(resource, 0) + amount * role.count
        return total


@dataclass(frozen=True)
class PodMembership:
    """What a recogniser says about one pod: its gang and the role it plays in it."""

    gang: Gang
    role: str


@dataclass(frozen=True)
class Verdict:
    """The feasibility answer for one gang."""

    allowed: bool
    #: Empty when allowed without remark; for a rejection, the sentence with numbers.
    reason: str = ""
    #: Short texts (≤ 120 characters each, as the API server requires) for the user.
    warnings: tuple[str, ...] = ()
    #: A stable machine-readable cause ("total-demand", "member-too-big", "packing",
    #: "no-eligible-nodes", ...) for metrics; empty when allowed.
    code: str = ""


Backend = Literal["gate", "coscheduling", "volcano", "native"]
