"""PodDisruptionBudgets as preemption reads them: which pods a budget covers and how
many of them may still go.

`read_budget(raw)` reduces a policy/v1 PodDisruptionBudget dict to a `Budget`: its
selector (matchLabels and matchExpressions, as metav1.LabelSelectorAsSelector reads
them) and `status.disruptionsAllowed`, which the disruption controller keeps. An empty
selector covers every pod of its namespace (policy/v1); a budget whose selector cannot
be read is skipped, as the Eviction API's lookup does.

`violations(pods, budgets)` counts, as kube-scheduler's preemption does
(`filterPodsWithPDBViolation`, pkg/scheduler/framework/preemption/preemption.go), the
pods whose going would take some budget below zero allowed disruptions.

Pure: dicts and `PodInfo`s in, counts out. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..cluster.observed_gangs import PodInfo
from ..eligibility import requirement_matches
from ..model import Requirement

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class Budget:
    """One PodDisruptionBudget: whom it covers, and how many of them may go now."""

    namespace: str
    name: str
    match_labels: tuple[tuple[str, str], ...]
    match_expressions: tuple[Requirement, ...]
    disruptions_allowed: int

    def covers(self, pod: PodInfo) -> bool:
        if pod.namespace != self.namespace:
            return False
        labels = pod.labels
        if any(labels.get(key) != value for key, value in self.match_labels):
            return False
        return all(requirement_matches(r, labels) for r in self.match_expressions)

    @property
    def title(self) -> str:
        return f"{self.namespace}/{self.name}"


def _requirement(raw: object) -> Requirement | None:
    if not isinstance(raw, Mapping):
        return None
    key, operator, values = raw.get("key"), raw.get("operator"), raw.get("values") or []
    if not isinstance(key, str) or operator not in _OPERATORS or not isinstance(values, list):
        return None
    return Requirement(key, operator, tuple(str(v) for v in values))


def read_budget(raw: Mapping[str, Any]) -> Budget | None:
    """The budget, or None when its selector cannot be read (no budget applies then)."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    selector = spec.get("selector")
    if not isinstance(selector, Mapping):
        # policy/v1: a null selector selects no pod.
        return None
    labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(labels, Mapping) or not isinstance(expressions, list):
        return None
    requirements = [_requirement(e) for e in expressions]
    if any(r is None for r in requirements):
        return None
    allowed = (raw.get("status") or {}).get("disruptionsAllowed", 0)
    return Budget(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        match_labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        match_expressions=tuple(r for r in requirements if r is not None),
        disruptions_allowed=allowed if type(allowed) is int else 0,
    )


def read_budgets(raws: Iterable[Mapping[str, Any]]) -> list[Budget]:
    """The budgets of these dicts whose selectors can be read."""
    return [b for b in (read_budget(raw) for raw in raws) if b is not None]


def violations(pods: Iterable[PodInfo], budgets: Sequence[Budget]) -> tuple[int, tuple[str, ...]]:
    """How many of `pods` would go against a budget (each pod taking one allowed
    disruption from every budget that covers it), and those budgets' names."""
    left = {b.title: b.disruptions_allowed for b in budgets}
    count = 0
    broken: set[str] = set()
    for pod in pods:
        over = False
        for budget in budgets:
            if budget.covers(pod):
                left[budget.title] -= 1
                if left[budget.title] < 0:
                    over = True
                    broken.add(budget.title)
        count += over
    return count, tuple(sorted(broken))
