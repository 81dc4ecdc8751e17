"""Could any single topology domain ever hold the gang? (`gangkeeper.io/topology-required`)

A gang that must run inside one domain of a node label (a zone, a rack or block, an
NVLink clique; the key listed in the config's `topology`) is refused when no domain
could hold its GPUs even empty: "the largest topology.kubernetes.io/zone domain holds
24 nvidia.com/gpu; the gang needs 32". Domains count the GPUs of the nodes its roles
may use that carry the key, declared pools included when their template sets it. A
pool whose template does not set the key may add nodes to any domain: the gang is
then admitted with a warning. Only the minMember cheapest members must fit.

Pure: `Gang` and `Capacity` in; (allowed, reason or warning) out.
"""

from __future__ import annotations

from ..cluster.capacity import Capacity
from ..dra.resource_names import resource_text
from ..model import Gang


def check_topology(gang: Gang, capacity: Capacity) -> tuple[bool, str] | None:
    """(False, reason) to refuse, (True, warning) to admit with one, None: nothing to say."""
    if len(gang.topology) != 2 or gang.topology[0] != "required":
        return None
    key = gang.topology[1]
    who = f"gang {gang.namespace}/{gang.name}"
    if key not in capacity.config.topology:
        return True, f"{who}: topology key {key} is not in the config's topology; ignored"
    need = {
        r: a for r, a in gang.min_member_demand().items() if capacity.config.is_gpu_resource(r)
    }
    if not need:
        return None
    allowed: set[int] = set()
    for role in gang.roles:
        shapes = capacity.eligible_shapes(role.placement)
        if shapes is None:
            return None  # a per-node placement: not decided here
        allowed.update(shapes)
    domains: dict[str, dict[str, int]] = {}
    for shape, sid, count, is_pool in capacity.ever_groups():
        if sid not in allowed:
            continue
        value = shape.label_map.get(key)
        if value is None:
            if is_pool:
                return True, f"{who}: a declared pool does not set {key}; not checked"
            continue
        totals = domains.setdefault(value, {})
        for resource, amount in shape.gpus:
            totals[resource] = totals.get(resource, 0) + amount * count
    for resource, total in sorted(need.items()):
        largest = max((d.get(resource, 0) for d in domains.values()), default=0)
        if total > largest:
            where = (
                f"the largest {key} domain holds {largest} {resource_text(resource)}"
                if domains
                else f"no node it may use has label {key}"
            )
            return False, (
                f"{who} must run inside one {key} domain; {where}; the gang needs "
                f"{total} {resource_text(resource)}"
            )
    return None
