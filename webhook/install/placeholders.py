"""What the placeholder feature installs: the PriorityClass of placeholder pods.

Placeholders (`gangkeeper.policies.autoscaling`) must be below every real workload,
so that any pod preempts them, and not below cluster-autoscaler's expendable cutoff
(`--expendable-pods-priority-cutoff`, -10 by default), under which the autoscaler
ignores a pod and adds no node for it. `preemptionPolicy: Never`: a placeholder asks
for a new node, it never evicts anything to get one. Installed with gangkeeper, so
the controller needs no RBAC on PriorityClasses.

Pure: builds a dict.
"""

from __future__ import annotations

from gangkeeper.policies.names import PLACEHOLDER_PRIORITY, PLACEHOLDER_PRIORITY_CLASS

from .objects import LABELS, Manifest


def priority_class() -> Manifest:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PLACEHOLDER_PRIORITY_CLASS, "labels": dict(LABELS)},
        "value": PLACEHOLDER_PRIORITY,
        "globalDefault": False,
        "preemptionPolicy": "Never",
        "description": (
            "gangkeeper's placeholder pods: room held for a gang while an autoscaler adds "
            "its nodes; preempted by any workload, never preempting"
        ),
    }
