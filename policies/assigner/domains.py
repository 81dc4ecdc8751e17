"""Place a gang in as few topology domains as possible (`gangkeeper.io/topology-preferred`).

A domain is the set of nodes sharing one value of a node label (a zone, a rack or
block, an NVLink clique); nodes without the label are in none. `fewest_domains(members,
nodes, key)` returns an assignment whose members use the smallest number of domains
any assignment could: it tries every combination of 1 domain, then of 2, and so on,
asking the assigner (`assign`) for the nodes of each. The first size with an answer is
the minimum: no smaller combination held the gang, and a combination of that size
that the assigner fills uses all of them (otherwise a smaller one would have worked).
Within a size, combinations are tried fullest domains first, so the emptier domains
stay whole for the next gang (as `topology-required` does).

Cost: sizes whose largest domains cannot add up to the gang's requests are not
enumerated, a combination whose free amounts cannot is skipped without asking the
assigner, and the assigner gets `STEPS_PER_COMBINATION` steps per combination; past
`COMBINATION_BUDGET` combinations asked or `ENUMERATION_LIMIT` looked at (a fleet of
many domains), domains are added most-free first until the gang fits: not proven
minimal, still valid. Minimality also needs the assigner to be exact,
as it is for gangs of up to `assign.EXACT_MEMBERS` members within its step budget.

Pure: frozen dataclasses in and out; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

from .assign import SEARCH_BUDGET, Assignment, Member, NodeView, NoRoom, Result, assign

#: Combinations of domains handed to the assigner before the greedy fallback.
COMBINATION_BUDGET = 32
#: Combinations looked at (most only summed) before the greedy fallback.
ENUMERATION_LIMIT = 4096
#: The assigner's step budget per combination (a combination that cannot hold the gang
#: would otherwise cost the assigner's whole budget before it says so).
STEPS_PER_COMBINATION = SEARCH_BUDGET // 4


def domains_of(nodes: Sequence[NodeView], key: str) -> dict[str, list[NodeView]]:
    """The nodes of each domain of `key`, by label value."""
    found: dict[str, list[NodeView]] = {}
    for node in nodes:
        if key in node.labels:
            found.setdefault(node.labels[key], []).append(node)
    return found


#: The pseudo-resource of `_free`: how many members the nodes could hold at most.
_SLOTS = ""


def _slots(node: NodeView, least: Mapping[str, int], members: int) -> int:
    """At most this many members fit the node: each asks at least `least` of every
    resource (the smallest request of each among the members)."""
    return min(
        [members, *(node.free.get(r, 0) // a for r, a in least.items() if a > 0)]
    )


def _free(
    nodes: Sequence[NodeView], resources: Sequence[str], least: Mapping[str, int], members: int
) -> dict[str, int]:
    """Free amounts of the nodes together, and (`_SLOTS`) the members they could hold."""
    free = {r: sum(n.free.get(r, 0) for n in nodes) for r in resources}
    free[_SLOTS] = sum(_slots(n, least, members) for n in nodes)
    return free


def _enough(free: Sequence[Mapping[str, int]], need: Mapping[str, int]) -> bool:
    return all(sum(f[r] for f in free) >= a for r, a in need.items())


def fewest_domains(
    members: Sequence[Member],
    nodes: Sequence[NodeView],
    key: str,
    *,
    budget: int = COMBINATION_BUDGET,
) -> Result:
    """An assignment over the fewest domains of `key`; NoRoom when no domain, nor all
    of them together, can hold the gang; Unpinned as `assign` says."""
    need: dict[str, int] = {}
    for member in members:
        for resource, amount in member.requests.items():
            if amount > 0:
                need[resource] = need.get(resource, 0) + amount
    resources = sorted(need)
    least = {r: min(m.requests.get(r, 0) for m in members) for r in resources}
    groups = domains_of(nodes, key)
    free = {v: _free(groups[v], resources, least, len(members)) for v in groups}
    need[_SLOTS] = len(members)
    # Fullest first (least free in all, then by name): ties go to the fuller domains.
    order = sorted(groups, key=lambda v: (sum(a for r, a in free[v].items() if r), v))
    asked = looked = 0
    for size in range(_fewest_possible(free, need), len(order) + 1):
        for combo in combinations(order, size):
            looked += 1
            if looked > ENUMERATION_LIMIT:
                return _greedy(members, groups, free)
            if not _enough([free[v] for v in combo], need):
                continue
            if asked >= budget:
                return _greedy(members, groups, free)
            asked += 1
            nodes_of = [n for v in combo for n in groups[v]]
            result = assign(members, nodes_of, budget=STEPS_PER_COMBINATION)
            if not isinstance(result, NoRoom):
                return result
    return NoRoom(f"no combination of {key} domains has room for all {len(members)} members")


def _fewest_possible(free: Mapping[str, Mapping[str, int]], need: Mapping[str, int]) -> int:
    """No fewer domains can hold the gang: for each resource, the k largest domains'
    free amounts must add up to what the gang asks (smaller sizes are not enumerated)."""
    fewest = 1
    for resource, amount in need.items():
        total, k = 0, 0
        for value in sorted((f[resource] for f in free.values()), reverse=True):
            if total >= amount:
                break
            total, k = total + value, k + 1
        fewest = max(fewest, k if total >= amount else len(free) + 1)
    return fewest


def _greedy(
    members: Sequence[Member],
    groups: Mapping[str, list[NodeView]],
    free: Mapping[str, Mapping[str, int]],
) -> Result:
    """Domains most-free first, one more each time, until the assigner fills them."""
    chosen: list[NodeView] = []
    for value in sorted(groups, key=lambda v: (-sum(a for r, a in free[v].items() if r), v)):
        chosen.extend(groups[value])
        result = assign(members, chosen)
        if not isinstance(result, NoRoom):
            return result
    return NoRoom(f"the {len(members)} members fit no set of domains")


def domains_used(assignment: Assignment, nodes: Sequence[NodeView], key: str) -> int:
    """How many domains of `key` an assignment uses (a node without the label counts
    as a domain of its own)."""
    by_name = {n.name: n for n in nodes}
    return len(
        {
            (by_name[name].labels.get(key) is None, by_name[name].labels.get(key, name))
            for name in assignment.nodes.values()
        }
    )
