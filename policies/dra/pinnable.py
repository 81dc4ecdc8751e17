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
pinned by their largest (`Pinning.extra`). `pinning` says why not (`Pinning.doubt`),
otherwise; the gang is then released unpinned, and the allocator, which sees the
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

Pure: a pod spec and the namespace's templates and claims in, a frozen verdict out.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass

from ..errors import InvalidObject
from .claims import DeviceDemand, pod_claims
from .extended import claim_limits
from .resource_names import PREFIX

#: A shared ResourceClaim as the release sees it: the node its pods must run on once
#: it is allocated ("" before; None when its allocation names no single node,
#: `allocated.allocated_node`) and what it asks (`claims.read_claim`).
SharedClaim = tuple[str | None, DeviceDemand]
#: A shared claim a pod's sharers are pinned together by: (name, the node its
#: allocation names or "" before, its devices as `dra:<class>` limits while not
#: allocated, asked once for all of them).
SharedUse = tuple[str, str, dict[str, int]]


@dataclass(frozen=True)
class Pinning:
    """What the release may promise of one pod's claims."""

    #: Why a count of free devices cannot place them; "" when it can.
    doubt: str
    #: Devices (`dra:<class>`) they may take beyond their count: firstAvailable
    #: requests' largest alternatives (`claims.DeviceDemand.extra`); a pin must fit
    #: these too.
    extra: dict[str, int]
    #: The shared claims it names, when none is a doubt.
    shared: tuple[SharedUse, ...]


def pinning(spec: object, templates: Mapping[str, DeviceDemand], *,
            counted: Container[str] = frozenset(),
            shared: Mapping[str, SharedClaim] | None = None,
            fewest: Mapping[str, int] | None = None) -> Pinning:
    """The `Pinning` of the claims in `spec` (a pod spec; no claim at all: no doubt).
    `counted`: the narrowed keys (`claims.narrowed_key`) the nodes were counted for;
    `shared`: the namespace's ResourceClaims by name, None when not known (a shared
    claim is then a doubt); `fewest`: what an All request asks of each class
    (`extended.fewest_with_pools`)."""
    try:
        claims = pod_claims(spec, templates)
    except InvalidObject as exc:
        return Pinning(f"DRA claims that cannot be read ({exc})", {}, ())
    extra = {PREFIX + name: count for name, count in sorted(claims.own.extra.items())}
    uses: list[SharedUse] = []
    for name in sorted(claims.shared):
        if shared is None:
            return Pinning(f"shared ResourceClaim {name} (its allocation decides the node)",
                           extra, ())  # fmt: skip
        use = _shared_use(name, shared.get(name), counted, fewest or {})
        if isinstance(use, str):
            return Pinning(use, extra, ())
        uses.append(use)
    if claims.unresolved:
        return Pinning(f"ResourceClaimTemplate {sorted(claims.unresolved)[0]} not found "
                       "(its devices are not counted)", extra, ())  # fmt: skip
    return Pinning(_demand_doubt(claims.own, counted, "a claim", "a request"), extra,
                   tuple(uses))  # fmt: skip


def _demand_doubt(demand: DeviceDemand, counted: Container[str], claim: str,
                  request: str) -> str:
    """Why `demand`'s count cannot place it (`claim` and `request` name what asks
    it in the sentence); "" when it can."""
    if demand.doubts:
        return f"{claim} whose {sorted(demand.doubts)[0]}"
    uncounted = sorted(k for k in demand.narrowed if k not in counted)
    if uncounted:
        return f"{request}'s own selectors ({uncounted[0]}) the nodes are not counted for yet"
    return ""


def _shared_use(name: str, claim: SharedClaim | None, counted: Container[str],
                fewest: Mapping[str, int]) -> SharedUse | str:
    """How the pods sharing ResourceClaim `name` are pinned together (to the node its
    allocation names or, before it, to one node where its devices are free), or why
    they cannot be."""
    if claim is None:
        return f"shared ResourceClaim {name} (not found: its devices are not counted)"
    node, demand = claim
    if node is None:
        return (f"shared ResourceClaim {name} (allocated to devices no single node "
                "holds: its allocation decides the nodes)")  # fmt: skip
    if node:
        return name, node, {}  # its devices are held on that node: only the node matters
    if demand.extra:
        return f"shared ResourceClaim {name} with firstAvailable alternatives"
    subject = f"shared ResourceClaim {name}"
    return _demand_doubt(demand, counted, subject, subject) or (
        name, "", claim_limits(demand, fewest, counted))
