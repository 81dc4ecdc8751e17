"""Every RBAC permission gangkeeper ships is used by a code path, and every call it makes has one.

gangkeeper's own code runs against the in-memory `FakeApi` (every request and watch
recorded): the server's cluster view (list + watch of nodes, pods and every owner kind,
one direct get per kind on a cache miss), the gang controller as `serve` runs it (its
informers, the Lease, releasing gangs of every backend, Events about a stuck gang, the
PodGroup nudge) and the self-managed certificates (the Secret and the webhook
configurations). With `autoscaling: provisioningrequest` (`gangkeeper manifests
--autoscaling provisioningrequest`) the controller also asks through ProvisioningRequests
and their PodTemplates; those rules are held to that run, and are absent by default.
Each recorded call becomes (verb, group, resource, namespace, name) as the API server's
authorizer sees it, and the test holds the rendered ClusterRole and
Role to that list both ways: a call with no rule would be refused in a cluster, and a
rule no call needs is a permission to drop.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders.gangs import (
    JOB,
    JOBSET,
    LWS,
    RAYCLUSTER,
    TRAINJOB,
    members,
    node,
    owner_object,
    pin,
    pod,
)
from builders.polling import wait_for
from builders.provisioning import provisioning_request
from kubernetes.client import ApiClient

from gangkeeper.certs import SelfManagedCerts
from gangkeeper.policies.cluster.observed_gangs import observe_gangs, pod_info
from gangkeeper.policies.model import Taint
from gangkeeper.policies.names import (
    DEFAULT_NAMESPACE,
    GATE,
    PROVISIONING_LABEL,
    PROVISIONING_REQUEST_LABEL,
    RELEASED_AT_ANNOTATION,
)
from gangkeeper.policies.release.groups import COSCHEDULING, native_resource
from gangkeeper.policies.release.requeue import requeue_patch
from gangkeeper.policies.settings.autoscaling import Autoscaling
from gangkeeper.policies.settings.config import Config, NodePool
from gangkeeper.webhook.controller.controller import GangController
from gangkeeper.webhook.controller.provisioning import POD_TEMPLATES, PROVISIONING_REQUESTS
from gangkeeper.webhook.controller.writes import rfc3339
from gangkeeper.webhook.install import render_manifests
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.informer import Informers
from gangkeeper.webhook.kube.resources import NODES, PODS
from gangkeeper.webhook.server.cluster_view import WatchClusterView, owner_resources

Access = tuple[str, str, str, str, str]  # verb, group, resource, namespace, name
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
OWNER = JOB
#: Keeps the other gangs of `controller_calls` off the node the preemption is about.
PREEMPT_TAINT = {"key": "pre", "value": "", "effect": "NoSchedule"}


def access(method: str, path: str, query: dict[str, Any]) -> Access | None:
    """The authorizer's view of one request (None: discovery, allowed to everyone)."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) > 3:
        group, rest = parts[1], parts[3:]
    else:
        return None  # /apis/<group> or /apis/<group>/<version>: discovery
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else "")
    if len(rest) > 2:  # a subresource: pods/eviction
        resource = f"{resource}/{rest[2]}"
    if method == "WATCH" or query.get("watch") in (True, "true", "1"):
        verb = "watch"
    elif method == "GET":
        verb = "get" if name else "list"
    else:
        verb = VERBS[method]
    return verb, group, resource, namespace, name


def recorded(api: FakeApi) -> set[Access]:
    found = (access(method, path, query) for method, path, query in list(api.calls))
    return {a for a in found if a is not None}


#: Seconds a controller thread on the FakeApi gets to make a call before the test fails.
WAIT = 10.0


# --- the code paths -----------------------------------------------------------------


def server_view_calls() -> set[Access]:
    api = FakeApi()
    informers = Informers(api)
    view = WatchClusterView(informers, Config(), devices=True)  # as `serve` builds it
    informers.start()
    try:
        assert view.wait_synced(10.0)
        for resource in owner_resources():
            api_version = f"{resource.group}/{resource.version}".lstrip("/")
            view.lookup(api_version, resource.kind, "team", "not-cached")
    finally:
        informers.stop()
    return recorded(api)


@pytest.fixture
def fake_rest() -> FakeApi:
    """The API the controller is given (`GangController(api=...)`), in memory."""
    return FakeApi()


def stuck_members(gang: str = "stuck", owner: dict[str, str] = LWS) -> list[dict[str, Any]]:
    """A gang released pinned an hour ago whose second member never bound: the
    watchdog deletes it for its owner (a LeaderWorkerSet) to recreate, or suspends its
    Job, JobSet, TrainJob or RayCluster."""
    pods = members(gang, 2, gates=(), gpus=1, owner=owner)
    for raw in pods:
        pin(raw, "n1")
        raw["metadata"]["annotations"][RELEASED_AT_ANNOTATION] = rfc3339(time.time() - 3600)
    pods[0]["spec"]["nodeName"] = "n1"
    return pods


def controller_calls(api: FakeApi) -> set[Access]:
    api.seed(NODES.path, node("n1", 8), node("n2", 8),
             node("n3", 8, labels={"pool": "pre"}, taints=[PREEMPT_TAINT]))
    # A pod of no gang fills n3; a gang of higher priority that may use only n3 preempts
    # it through the Eviction API.
    low = pod("low", 8, gates=(), node_name="n3", phase="Running")
    low["spec"]["priority"] = 0
    urgent = members("urgent", 1, gpus=8, owner=OWNER, selector={"pool": "pre"},
                     tolerations=[{"key": "pre", "operator": "Exists"}])
    urgent[0]["spec"]["priority"] = 100
    api.seed(PODS.path, low, *urgent)
    api.seed(PODS.path, *stuck_members(), *stuck_members("stuck-job", OWNER),
             *stuck_members("stuck-js", JOBSET), *stuck_members("stuck-tj", TRAINJOB),
             *stuck_members("stuck-rc", RAYCLUSTER))
    api.seed("/apis/batch/v1/jobs", owner_object(OWNER))
    api.seed("/apis/jobset.x-k8s.io/v1alpha2/jobsets", owner_object(JOBSET))
    api.seed("/apis/trainer.kubeflow.org/v1alpha1/trainjobs", owner_object(TRAINJOB))
    api.seed("/apis/ray.io/v1/rayclusters", owner_object(RAYCLUSTER))
    api.seed(PODS.path, *members("plain", 2), *members("cos", 2, backend="coscheduling",
                                                        owner=OWNER),
             *members("vol", 2, backend="volcano", owner=OWNER),
             *members("huge", 3, gpus=8), pod("other", gates=("example.com/other",)),
             # On a declared pool with no node: placeholders (get a member, create).
             *members("scaled", 2, gpus=8, selector={"pool": "scaled"}, owner=OWNER,
                      tolerations=[{"key": "scaled", "operator": "Exists"}]))
    # Tainted, so that no other gang here may use (and so wait for) the pool.
    pool = NodePool("scaled", 4, labels={"pool": "scaled"}, allocatable={"nvidia.com/gpu": 8},
                    taints=(Taint("scaled", "", "NoSchedule"),))
    controller = GangController(ApiClient(), Config(gang_timeout_seconds=0, pools=(pool,)),
                                namespace=DEFAULT_NAMESPACE, identity="rbac-test",
                                settle_seconds=0.0, resync_seconds=0.1, api=api)
    controller.start()
    try:
        def released(prefix: str) -> bool:
            pods = api.objects[PODS.path].values()
            mine = [p for p in pods if p["metadata"]["name"].startswith(prefix)]
            return bool(mine) and all(
                GATE not in [g["name"] for g in p["spec"].get("schedulingGates") or []]
                for p in mine)

        for prefix in ("plain-", "cos-", "vol-"):
            wait_for(lambda p=prefix: released(p), WAIT,  # type: ignore[misc]
                     message=f"gang {prefix} released")
        wait_for(lambda: any(a[2] == "events" for a in recorded(api)), WAIT,
                 message="a stuck-gang Event")
        wait_for(lambda: any(a[0] == "create" and a[2] == "pods" for a in recorded(api)), WAIT,
                 message="the placeholders of a gang on a pool at zero")
        wait_for(lambda: any(a[0] == "delete" and a[2] == "pods" for a in recorded(api)), WAIT,
                 message="the watchdog's delete of a stuck member")
        wait_for(lambda: any(a[0] == "create" and a[2] == "pods/eviction"
                             for a in recorded(api)), WAIT,
                 message="the eviction of a preemption victim")
        for kind in ("jobs", "jobsets", "trainjobs"):
            wait_for(lambda k=kind: any(a[0] == "patch" and a[2] == k  # type: ignore[misc]
                                        for a in recorded(api)), WAIT,
                     message=f"the watchdog's suspension of a stuck gang's {kind}")
        # The native backend's group and the coscheduling nudge, on the same client.
        gang = observe_gangs([pod_info(p, Config()) for p in members(
            "nat", 2, backend="native", owner=OWNER)], Config())[0]
        controller.groups._native = native_resource("v1beta1")
        controller.groups._native_checked = True
        assert controller.groups.ensure(gang)
        controller.executor._nudge("team", "cos", requeue_patch("2027-01-15T08:00:00.000000Z"))
    finally:
        controller.stop()
    return recorded(api)


def provisioning_calls(api: FakeApi) -> set[Access]:
    """A controller with `autoscaling: provisioningrequest`: a gang on a pool at zero gets
    a PodTemplate (one member read) and a request; an orphaned pair is deleted."""
    api.seed(PODS.path, *members("scaled", 2, gpus=8, selector={"pool": "scaled"},
                                 owner=OWNER))
    orphan = provisioning_request("gone", namespace="team")
    template = {"apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": "gone-gkpr-1-0", "namespace": "team", "uid": "uid-t",
                             "labels": {PROVISIONING_LABEL: "gone",
                                        PROVISIONING_REQUEST_LABEL: "gone-gkpr-1"}}}
    api.seed(PROVISIONING_REQUESTS.path, orphan)
    api.seed(POD_TEMPLATES.path, template)
    pool = NodePool("scaled", 4, labels={"pool": "scaled"}, allocatable={"nvidia.com/gpu": 8})
    config = Config(pools=(pool,), autoscaling=Autoscaling(mode="provisioningrequest"))
    controller = GangController(ApiClient(), config, namespace=DEFAULT_NAMESPACE,
                                identity="rbac-test", settle_seconds=0.0, resync_seconds=0.1,
                                api=api)
    controller.start()
    try:
        for verb in ("create", "delete"):
            for resource in ("provisioningrequests", "podtemplates"):
                wait_for(lambda v=verb, r=resource: any(  # type: ignore[misc]
                    a[:3] == (v, a[1], r) for a in recorded(api)), WAIT,
                    message=f"{verb} {resource}")
    finally:
        controller.stop()
    return recorded(api)


class RecordingCalls:
    """The certificate manager's `KubeCalls`, recorded as the requests ClientCalls makes."""

    def __init__(self) -> None:
        self.accesses: set[Access] = set()
        self.secret: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret",
                                       "metadata": {"name": "gangkeeper-tls",
                                                    "resourceVersion": "1"}}
        self.hooks = {name: o for o in render_manifests() if "Webhook" in o["kind"]
                      for name in [o["metadata"]["name"]]}

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.accesses.add(("get", "", "secrets", namespace, name))
        return self.secret

    def create_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self.accesses.add(("create", "", "secrets", namespace, ""))

    def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        self.accesses.add(("update", "", "secrets", namespace, name))
        self.secret = body

    def read_webhook_configuration(self, kind: str, name: str) -> dict[str, Any] | None:
        self.accesses.add(("get", "admissionregistration.k8s.io",
                           f"{kind}webhookconfigurations", "", name))
        return self.hooks[name]

    def patch_webhook_configuration(self, kind: str, name: str,
                                    patch: list[dict[str, Any]]) -> None:
        self.accesses.add(("patch", "admissionregistration.k8s.io",
                           f"{kind}webhookconfigurations", "", name))


def certificate_calls(cert_dir: Path) -> set[Access]:
    calls = RecordingCalls()
    SelfManagedCerts(None, namespace=DEFAULT_NAMESPACE, cert_dir=cert_dir,
                     calls=calls).reconcile()
    return calls.accesses


@pytest.fixture
def used(fake_rest: FakeApi, tmp_path: Path) -> set[Access]:
    return server_view_calls() | controller_calls(fake_rest) | certificate_calls(tmp_path)


# --- the rules ------------------------------------------------------------------------


def rules(**options: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(scope, PolicyRule): scope "" for the ClusterRole, the namespace for the Role."""
    for obj in render_manifests(**options):
        if obj["kind"] in ("ClusterRole", "Role"):
            for rule in obj["rules"]:
                yield obj["metadata"].get("namespace", ""), rule


def permits(scope: str, rule: dict[str, Any], a: Access) -> bool:
    verb, group, resource, namespace, name = a
    return (
        group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]
        and (not scope or namespace == scope)
        and (not rule.get("resourceNames") or name in rule["resourceNames"])
    )


def test_every_call_gangkeeper_makes_is_permitted(used: set[Access]) -> None:
    assert_permitted(used)


def assert_permitted(used: set[Access], **options: Any) -> None:
    refused = sorted(a for a in used if not any(permits(s, r, a) for s, r in rules(**options)))
    assert refused == [], f"calls no shipped rule permits: {refused}"


def test_every_shipped_permission_is_used_by_some_call(used: set[Access]) -> None:
    assert_used(used)


@pytest.fixture
def used_with_requests(used: set[Access], fake_rest: FakeApi) -> set[Access]:
    return used | provisioning_calls(fake_rest)


def test_with_provisioning_requests_every_call_is_permitted(
    used_with_requests: set[Access],
) -> None:
    assert_permitted(used_with_requests, provisioning_requests=True)


def test_with_provisioning_requests_every_shipped_permission_is_used(
    used_with_requests: set[Access],
) -> None:
    assert_used(used_with_requests, provisioning_requests=True)


def test_by_default_nothing_touches_provisioning_requests_or_pod_templates(
    used: set[Access],
) -> None:
    touched = {a for a in used if a[2] in ("provisioningrequests", "podtemplates")}
    assert touched == set()
    assert not any(r["resources"] in (["podtemplates"], ["provisioningrequests"])
                   for _, r in rules())


def assert_used(used: set[Access], **options: Any) -> None:
    unused = []
    for scope, rule in rules(**options):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    names = rule.get("resourceNames") or [None]
                    for name in names:
                        if not any(a[:3] == (verb, group, resource)
                                   and (name is None or a[4] == name)
                                   and (not scope or a[3] == scope) for a in used):
                            unused.append((verb, group or "core", resource, name or "*"))
    assert unused == [], f"permissions no code path uses: {unused}"


def test_the_recorder_sees_what_the_authorizer_sees() -> None:
    assert access("PATCH", "/api/v1/namespaces/team/pods/p", {}) == (
        "patch", "", "pods", "team", "p")
    assert access("GET", "/apis/batch/v1/jobs", {"watch": "true"}) == (
        "watch", "batch", "jobs", "", "")
    assert access("GET", "/apis/scheduling.k8s.io/v1beta1", {}) is None
    assert access("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{DEFAULT_NAMESPACE}/leases/"
                  "gangkeeper-controller", {}) == (
        "update", "coordination.k8s.io", "leases", DEFAULT_NAMESPACE, "gangkeeper-controller")
    assert COSCHEDULING.plural == "podgroups"
