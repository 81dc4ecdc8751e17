"""Shared ResourceClaims: a gang asks a claim's devices once, however many members name it.

A pod naming an existing ResourceClaim (core/v1 `PodResourceClaim.resourceClaimName`)
shares it with every other pod naming it: the allocator allocates it once, and every
pod sharing it runs where its devices are. `extended.with_claim_limits` puts such a
claim's devices in the pod's limits under a name of their own, `dra:<class>@<claim>`
(`resource_names.shared_name`), that no node offers; `charged_once(gang)` takes those names out of
every role and gives each claim's devices, as `dra:<class>`, to one member: the first
role naming the claim is split into that one member and the others. So totals count
each claim once, and the member holding it must find its own devices and the claim's
on one node.

Sound, not exact: every pod sharing a node-local claim must run on the one node it is
allocated on, and only one member is held to that here, so a gang may be admitted that
cannot run (it then waits), never refused when it could.

Pure: a `Gang` in, a `Gang` out.
"""

from __future__ import annotations

import dataclasses

from ..amounts import plus
from ..model import Gang, Role
from .resource_names import PREFIX, SHARED


def _split(resource: str) -> tuple[str, str] | None:
    """(class resource `dra:<class>`, claim) of a shared claim's name; None otherwise."""
    if not resource.startswith(PREFIX) or SHARED not in resource:
        return None
    class_resource, _, claim = resource.partition(SHARED)
    return class_resource, claim


def charged_once(gang: Gang) -> Gang:
    """The gang with each shared claim's devices asked by one member (module docstring);
    the same object when no member shares a claim."""
    if not any(_split(r) for role in gang.roles for r in role.demand):
        return gang
    held: set[str] = set()
    names = {role.name for role in gang.roles}
    roles: list[Role] = []
    for role in gang.roles:
        own = {r: a for r, a in role.demand.items() if _split(r) is None}
        extra: dict[str, int] = {}
        for resource, amount in role.demand.items():
            parts = _split(resource)
            if parts is None or parts[1] in held or role.count <= 0:
                continue
            extra[parts[0]] = extra.get(parts[0], 0) + amount
        claims = {p[1] for r in role.demand if (p := _split(r)) is not None}
        if role.count > 0:
            held |= claims
        if not extra:
            roles.append(dataclasses.replace(role, demand=own))
            continue
        holder = dataclasses.replace(role, count=1, demand=plus(own, extra))
        if role.count == 1:
            roles.append(holder)
            continue
        # The others keep the role's name: a pod's membership names it.
        roles.append(dataclasses.replace(role, count=role.count - 1, demand=own))
        name = _free_name(f"{role.name}-claim", names)
        names.add(name)
        roles.append(dataclasses.replace(holder, name=name))
    return dataclasses.replace(gang, roles=tuple(roles))


def _free_name(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}-{n}"
    return candidate
