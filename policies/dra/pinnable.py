"""Whether counting a pod's claimed devices can promise a node: may the release pin it.

The release pins a gang member on a node where its claims' devices (`dra:<class>`
amounts, `extended.with_claim_limits`) are free, as it does for GPUs. A free count
answers for the scheduler's allocator only when every claim is the pod's own (made
from a ResourceClaimTemplate that is known) or a shared ResourceClaim whose pods the
release pins together (to the node its allocation names, or, before it is allocated,
to one node where its devices are free), and asks an exact number of a class's
devices, every device of it on the node (allocationMode All: the node's one
`dra:<class>/all`, `assigner.whole_nodes`), or a number of those its own selectors
accept where the nodes were counted for them (`counted`), or firstAvailable
alternatives of exact counts of one class, which it asks at their smallest and is
pinned by their largest (`pin_extra`). `pin_doubt` returns why
not, otherwise; the gang is then released unpinned, and the allocator, which sees the
devices themselves, chooses the nodes:

- a shared ResourceClaim (`resourceClaimName`) not known, allocated to devices no
  single node holds, or asking what a count cannot place (below);
- a ResourceClaimTemplate that was not given: its devices were not counted;
- a request whose count may not be what the allocator takes on a node
  (`claims.DeviceDemand.doubts`: adminAccess, firstAvailable alternatives of more than
  one class, an All one, or with selectors of their own);
- a request whose own selectors the nodes were not counted for (it asks its class).

A node whose count of a class is unknown (`extended.UNCOUNTED`) is the pinning's to
judge (`release.pinning`): it depends on the node, not on the pod.

Pure: a pod spec and the namespace's templates in, a sentence out.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from ..errors import InvalidObject
from .claims import DeviceDemand, pod_claims
from .resource_names import PREFIX

#: A shared ResourceClaim as the release sees it: the node its pods must run on once
#: it is allocated ("" before; None when its allocation names no single node,
#: `allocated.allocated_node`) and what it asks (`claims.read_claim`).
SharedClaim = tuple[str | None, DeviceDemand]


def pin_doubt(spec: object, templates: Mapping[str, DeviceDemand],
              counted: Container[str] = frozenset(),
              shared: Mapping[str, SharedClaim] | None = None) -> str:
    """Why the devices of the claims in `spec` (a pod spec) cannot be placed by their
    count; "" when they can (no claim at all included). `counted`: the narrowed keys
    (`claims.narrowed_key`) the nodes were counted for. `shared`: the namespace's
    ResourceClaims by name; None when not known (a shared claim is then a doubt)."""
    try:
        claims = pod_claims(spec, templates)
    except InvalidObject as exc:
        return f"DRA claims that cannot be read ({exc})"
    for name in sorted(claims.shared):
        if shared is None:
            return f"shared ResourceClaim {name} (its allocation decides the node)"
        why = _shared_doubt(name, shared.get(name), counted)
        if why:
            return why
    if claims.unresolved:
        return (f"ResourceClaimTemplate {sorted(claims.unresolved)[0]} not found "
                "(its devices are not counted)")  # fmt: skip
    if claims.own.doubts:
        return f"a claim whose {sorted(claims.own.doubts)[0]}"
    uncounted = sorted(k for k in claims.own.narrowed if k not in counted)
    if uncounted:
        return (f"a request's own selectors ({uncounted[0]}) the nodes are not counted "
                "for yet")  # fmt: skip
    return ""


def pin_extra(spec: object, templates: Mapping[str, DeviceDemand]) -> dict[str, int]:
    """Devices (`dra:<class>`) the claims in `spec` may take beyond their count: their
    firstAvailable requests' largest alternatives (`claims.DeviceDemand.extra`). The
    release pins such a member only where these fit too; {} for none."""
    try:
        extra = pod_claims(spec, templates).own.extra
    except InvalidObject:
        return {}  # `pin_doubt` says why: the gang is not pinned
    return {PREFIX + name: count for name, count in sorted(extra.items())}


def _shared_doubt(name: str, claim: SharedClaim | None, counted: Container[str]) -> str:
    """Why the pods sharing ResourceClaim `name` cannot be pinned together, to the node
    its allocation names or, before it, to one node where its devices are free; ""
    when they can."""
    if claim is None:
        return f"shared ResourceClaim {name} (not found: its devices are not counted)"
    node, demand = claim
    if node is None:
        return (f"shared ResourceClaim {name} (allocated to devices no single node "
                "holds: its allocation decides the nodes)")  # fmt: skip
    if node:
        return ""  # its devices are held on that node already: only the node matters
    if demand.doubts:
        return f"shared ResourceClaim {name} whose {sorted(demand.doubts)[0]}"
    if demand.extra:
        return f"shared ResourceClaim {name} with firstAvailable alternatives"
    uncounted = sorted(k for k in demand.narrowed if k not in counted)
    if uncounted:
        return (f"shared ResourceClaim {name}'s own selectors ({uncounted[0]}) the nodes "
                "are not counted for yet")  # fmt: skip
    return ""
