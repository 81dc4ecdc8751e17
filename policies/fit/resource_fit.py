"""Could the gang's members ever get the cpu, memory and storage they ask for?

GPU packing (`feasibility`) is not enough: a gang whose members ask for more cpu or
memory than any GPU node they may use offers is admitted, released when its GPUs are
free, and then never binds. `check_resources(gang, capacity)` refuses it, with
numbers, on the "ever" view (every live GPU node at its allocatable, declared pools):

- `member-too-big`: a role's member needs, together, its GPUs and its other requests
  on one node, and no node it may use offers all of them;
- `total-demand`: the whole gang needs more of a resource than all the nodes its
  roles may use together offer.

A role without GPUs may use any node, GPU nodes or not (the capacity keeps nodes
without GPUs apart for this), so it is checked against every node and declared pool
its placement allows. Only proofs reject: placements that read node identity, a
resource some eligible node or pool does not report, and gangs with minMember below
their size (which members run is not known) are all admitted, as is every gang when
no node or pool is known at all.

Pure: `Gang` and `Capacity` in, a reason or None out.
"""

from __future__ import annotations

from collections import Counter

from ..cluster.capacity import Capacity
from ..cluster.node_resources import OtherVector, shown, unknown
from ..dra.resource_names import resource_text
from ..model import Gang, Role


def _gpus(role: Role, capacity: Capacity) -> dict[str, int]:
    return {r: a for r, a in role.demand.items() if a > 0 and capacity.config.is_gpu_resource(r)}


def _eligible(role: Role, capacity: Capacity) -> tuple[list[int], Counter[OtherVector]] | None:
    shapes = capacity.eligible_shapes(role.placement, plain=not _gpus(role, capacity))
    if shapes is None:
        return None
    return shapes, capacity.other.of(shapes)


def _member_fits(
    role: Role, gpus: dict[str, int], shapes: list[int], capacity: Capacity
) -> bool | None:
    """Whether some node the role may use holds a whole member (None: unknown)."""
    for sid in shapes:
        have = dict(capacity.shape_gpus(sid))
        if any(have.get(r, 0) < a for r, a in gpus.items()):
            continue
        for vector in capacity.other.of([sid]):
            offered = dict(vector)
            if any(r not in offered for r in role.requests):
                return None
            if all(offered[r] >= a for r, a in role.requests.items()):
                return True
    return False


def _largest(vectors: Counter[OtherVector], resource: str) -> int:
    return max((dict(v).get(resource, 0) for v in vectors), default=0)


def check_resources(gang: Gang, capacity: Capacity) -> tuple[str, str] | None:
    """(code, reason) when the gang can never get its non-GPU requests; else None."""
    if gang.min_member < gang.size:
        return None
    if capacity.unknown and not capacity.plain_count:
        return None  # nothing known: nothing proven
    roles = [r for r in gang.roles if r.count > 0 and r.requests]
    who = f"gang {gang.namespace}/{gang.name}"
    union: dict[int, None] = {}
    need: dict[str, int] = {}
    for role in roles:
        found = _eligible(role, capacity)
        if found is None:
            return None
        shapes, vectors = found
        union.update(dict.fromkeys(shapes))
        for resource, amount in role.requests.items():
            need[resource] = need.get(resource, 0) + amount * role.count
        if not shapes or _member_fits(role, _gpus(role, capacity), shapes, capacity) is not False:
            continue
        wants = ", ".join(shown(r, a) for r, a in sorted(role.requests.items()))
        largest = ", ".join(
            shown(r, _largest(vectors, r)) for r in sorted(role.requests) if not unknown(vectors, r)
        )
        gpu_text = " + ".join(
            f"{a} {resource_text(r)}" for r, a in sorted(_gpus(role, capacity).items()))
        needs = f"{gpu_text} with {wants}" if gpu_text else wants
        return "member-too-big", (
            f"{who} (role {role.name}): each member needs {needs} on one "
            f"node; no node it may use offers that (the largest offer {largest})"
        )
    vectors = capacity.other.of(list(union))
    for resource, total in sorted(need.items()):
        if unknown(vectors, resource):
            continue
        have = sum(dict(v)[resource] * n for v, n in vectors.items())
        if total > have:
            nodes = sum(vectors.values())
            return "total-demand", (
                f"{who} needs {shown(resource, total)} in all; the {nodes} nodes it may use "
                f"offer at most {shown(resource, have)}"
            )
    return None
