"""Whether counting a pod's claimed devices can promise a node: may the release pin it.

The release pins a gang member on a node where its claims' devices (`dra:<class>`
amounts, `extended.with_claim_limits`) are free, as it does for GPUs. A free count
answers for the scheduler's allocator only when every claim is the pod's own (made
from a ResourceClaimTemplate that is known) and asks an exact number of a class's
devices, every device of it on the node (allocationMode All: the node's one
`dra:<class>/all`, `assigner.whole_nodes`), or a number of those its own selectors
accept where the nodes were counted for them (`counted`), or firstAvailable
alternatives of exact counts of one class, which it asks at their smallest and is
pinned by their largest (`pin_extra`). `pin_doubt` returns why
not, otherwise; the gang is then released unpinned, and the allocator, which sees the
devices themselves, chooses the nodes:

- a shared ResourceClaim (`resourceClaimName`): once allocated, its devices decide the
  node of every pod that shares it, which a count of free devices cannot see;
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


def pin_doubt(spec: object, templates: Mapping[str, DeviceDemand],
              counted: Container[str] = frozenset()) -> str:
    """Why the devices of the claims in `spec` (a pod spec) cannot be placed by their
    count; "" when they can (no claim at all included). `counted`: the narrowed keys
    (`claims.narrowed_key`) the nodes were counted for."""
    try:
        claims = pod_claims(spec, templates)
    except InvalidObject as exc:
        return f"DRA claims that cannot be read ({exc})"
    if claims.shared:
        return (f"shared ResourceClaim {sorted(claims.shared)[0]} (its allocation "
                "decides the node)")  # fmt: skip
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
