"""The live Pods a user may list, for the commands that read the cluster as that user
(`gangkeeper view`, `status`, `explain`, `ungate`): every namespace's in one list when
RBAC allows it, else namespace by namespace, with what could not be read said in words.

A user with a Role in some namespaces and no ClusterRole (the usual researcher) may not
list the pods of every namespace. Then the pods are read of `namespace` alone when one
is asked, else of every Namespace listed; those refused are left out and named in
`notes` (their gangs are not shown, and the GPUs their pods hold count as free). A user
who may list neither every pod nor the Namespaces is told to name one (`-n`).

May touch: the API, lists only. Decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gangkeeper.policies.errors import ClusterStateError

from .api import Api, Forbidden
from .informer import list_all

#: Pods that hold or wait for capacity (finished ones hold none), as `status` lists them.
LIVE_PODS = [("fieldSelector", "status.phase!=Succeeded,status.phase!=Failed")]


@dataclass(frozen=True)
class ReadablePods:
    pods: list[Mapping[str, Any]]
    #: The namespaces they were read from; None: every one, in one list.
    namespaces: Sequence[str] | None
    #: What could not be read, said for the user (empty when everything was).
    notes: tuple[str, ...]


def list_live_pods(api: Api, namespace: str | None, command: str) -> ReadablePods:
    """The live pods this user may list; ClusterStateError naming `command -n
    NAMESPACE` when they may list neither every pod nor the Namespaces."""
    try:
        return ReadablePods(list_all(api, "/api/v1/pods", LIVE_PODS), None, ())
    except Forbidden as exc:
        everywhere = exc
    if namespace:
        candidates = [namespace]
    else:
        try:
            candidates = sorted(
                str(ns["metadata"]["name"]) for ns in list_all(api, "/api/v1/namespaces")
            )
        except Forbidden as exc:
            raise ClusterStateError(
                f"cannot list Pods of every namespace ({everywhere}) nor the Namespaces "
                f"({exc}): run `{command} -n NAMESPACE` with a namespace you may read"
            ) from exc
    pods: list[Mapping[str, Any]] = []
    readable: list[str] = []
    refused: list[str] = []
    for ns in candidates:
        try:
            pods += list_all(api, f"/api/v1/namespaces/{ns}/pods", LIVE_PODS)
            readable.append(ns)
        except Forbidden:
            refused.append(ns)
    notes: list[str] = []
    if refused:
        which = "namespace" if len(refused) == 1 else "namespaces"
        notes.append(
            f"cannot list Pods in {which} {', '.join(refused)} (forbidden): "
            "their gangs are not shown, and the GPUs their pods hold count as free"
        )
    if namespace and readable:
        notes.append(
            f"cannot list Pods of every namespace ({everywhere}): only {namespace}'s are "
            "counted, and the GPUs pods of other namespaces hold count as free"
        )
    return ReadablePods(pods, readable, tuple(notes))
