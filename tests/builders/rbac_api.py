"""A `FakeApi` whose user's RBAC stops short, as a researcher's Role does: it may list
pods (and Events) in some namespaces, not of every namespace at once nor in `hidden`.
For the tests of `gangkeeper view` and of `status` / `explain` reading as that user."""

from __future__ import annotations

from collections.abc import Collection

from builders.gangs import members, node
from gangkeeper.webhook.kube.api import ApiError, Call
from gangkeeper.webhook.kube.fake import FakeApi

PODS, NODES, NAMESPACES = "/api/v1/pods", "/api/v1/nodes", "/api/v1/namespaces"


class RbacApi(FakeApi):
    """A FakeApi answering 403, as the API server does, for lists of every namespace's
    pods and Events, for the namespaces in `hidden`, and (without `list_namespaces`)
    for the list of namespaces itself."""

    def __init__(self, hidden: Collection[str], list_namespaces: bool = True) -> None:
        super().__init__()
        self.hidden = set(hidden)
        self.list_namespaces = list_namespaces

    def send(self, call: Call) -> dict[str, object]:
        parts = call.path.strip("/").split("/")
        everywhere = call.path in (PODS, "/apis/events.k8s.io/v1/events")
        if call.path == NAMESPACES and not self.list_namespaces:
            raise ApiError(403, "Forbidden", '{"message": "namespaces is forbidden"}')
        namespaced = "namespaces" in parts[:-1] and parts[parts.index("namespaces") + 1]
        if call.method == "GET" and (everywhere or namespaced in self.hidden):
            raise ApiError(403, "Forbidden", f'{{"message": "{call.path} is forbidden"}}')
        return super().send(call)


def rbac_cluster(hidden: Collection[str] = ("b",), *, list_namespaces: bool = True) -> RbacApi:
    """Gang `mine` (2 pods) in namespace a, `theirs` in b, one 8-GPU node."""
    api = RbacApi(hidden, list_namespaces)
    api.seed(PODS, *members("mine", 2, namespace="a"), *members("theirs", 2, namespace="b"))
    api.seed(NODES, node("n", 8))
    api.seed(NAMESPACES, *({"metadata": {"name": ns}} for ns in ("a", "b")))
    return api
