"""The live path of DRA: `kube.device_view.DeviceView` fed informer events, and the
admission decisions it makes possible (webhook/server/admission.py).

Plain dicts shaped as `k8s.io/api/resource/v1/types.go`: a ResourceSlice per node
(`spec.driver`, `spec.nodeName`, `spec.pool` with `generation` and
`resourceSliceCount`, `spec.devices[].name` and `attributes`), a DeviceClass with a
CEL selector, a ResourceClaimTemplate (`spec.spec.devices.requests[].exactly` with
`deviceClassName` and `count`), and core/v1 `PodSpec.resourceClaims[]` naming it.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
import time
from collections.abc import Mapping
from typing import Any

from builders.devices import (
    CLASS,
    DEVICE_CLASS,
    DRIVER,
    NAMESPACE,
    TEMPLATE,
    Sink,
    listed,
    node,
    resource_slice,
)

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.device_view import (
    CLAIM_TEMPLATES,
    CLASSES,
    SLICES,
    DeviceView,
    with_device_names,
)
from gangkeeper.webhook.kube.informer import object_key as key
from gangkeeper.webhook.server import admission
from gangkeeper.webhook.server.admission import Policy, parse_review

# --- the view ---------------------------------------------------------------------------


def test_nodes_reach_the_capacity_with_their_slices_devices_once_slices_and_classes_are_listed(
) -> None:
    sink, seen = Sink(), []
    view = DeviceView(sink, seen.append)
    listed(view, sink)
    assert {name: sink.gpus(name) for name in sink.nodes} == {
        f"dra-node-{i}": "8" for i in range(4)
    }
    assert seen == [SLICES, CLASSES, CLAIM_TEMPLATES]  # each store says when it is listed


def test_the_first_list_recomputes_the_nodes_once_not_once_per_slice() -> None:
    sink = Sink()
    view = DeviceView(sink)
    listed(view, sink, nodes=50)
    # 50 as the Nodes arrive, 50 when the slices' list ends, 50 when the classes' does;
    # not 50 per slice (2,500 at 50 nodes, 25 million at 5,000).
    assert sink.upserts == 150


def test_a_slice_that_changes_or_goes_changes_its_nodes_count() -> None:
    sink = Sink()
    view = DeviceView(sink)
    listed(view, sink)
    view.slices.upsert(resource_slice("dra-node-1", 4, generation=2))
    assert sink.gpus("dra-node-1") == "4"
    view.slices.delete(resource_slice("dra-node-2", 8))
    assert sink.gpus("dra-node-2") is None
    assert sink.gpus("dra-node-0") == "8"


def test_a_node_computed_before_a_class_change_never_reaches_the_sink_after_it() -> None:
    # The Node informer's thread delivers a heartbeat computed with the old classes;
    # meanwhile the class informer's thread refreshes every Node. Seen on the sandbox:
    # the stale Node arrived last and the controller saw no devices on it for good.
    class Slow(Sink):
        def __init__(self) -> None:
            super().__init__()
            self.inside, self.go = threading.Event(), threading.Event()
            self.armed = False

        def upsert(self, obj: Mapping[str, Any]) -> None:
            if self.armed and not self.inside.is_set() and obj["metadata"]["name"] == "dra-node-0":
                self.inside.set()
                self.go.wait(5)
            super().upsert(obj)

    sink = Slow()
    view = DeviceView(sink)
    listed(view, sink)
    sink.armed = True
    heartbeat = threading.Thread(target=view.upsert, args=(node("dra-node-0"),))
    heartbeat.start()
    assert sink.inside.wait(5)
    serving = copy.deepcopy(DEVICE_CLASS)
    serving["spec"]["extendedResourceName"] = "nvidia.com/gpu"
    change = threading.Thread(target=view.classes.upsert, args=(serving,))
    change.start()
    time.sleep(0.2)  # the refresh, if unordered, hands dra-0 on now
    sink.go.set()
    heartbeat.join(5)
    change.join(5)
    assert sink.nodes["dra-node-0"]["status"]["allocatable"].get("nvidia.com/gpu") == "8"


def test_a_bad_slice_is_ignored_and_the_others_still_count() -> None:
    sink = Sink()
    view = DeviceView(sink)
    listed(view, sink)
    broken = resource_slice("dra-node-3", 8)
    del broken["spec"]["driver"]
    view.slices.upsert(broken)  # logged, counted as absent
    assert sink.gpus("dra-node-3") is None
    assert sink.gpus("dra-node-0") == "8"


# --- admission with claims ----------------------------------------------------------------


def job(name: str, workers: int) -> dict[str, Any]:
    """An Indexed Job whose every worker claims 8 devices through TEMPLATE."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}"},
            "spec": {"parallelism": workers, "completions": workers,
                     "completionMode": "Indexed",
                     "template": {"spec": {
                         "restartPolicy": "Never",
                         "resourceClaims": [{"name": "gpus",
                                             "resourceClaimTemplateName": "eight-gpus"}],
                         "containers": [{"name": "trainer", "image": "trainer:1",
                                         "resources": {"claims": [{"name": "gpus"}]}}],
                     }}}}  # fmt: skip


def pod_of(owner: Mapping[str, Any]) -> dict[str, Any]:
    """A pod as the Job controller creates it."""
    name = owner["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{name}-0-", "namespace": NAMESPACE,
                         "labels": {"batch.kubernetes.io/job-name": name, "job-name": name,
                                    "batch.kubernetes.io/job-completion-index": "0"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": name, "uid": owner["metadata"]["uid"],
                                              "controller": True}]},
            "spec": copy.deepcopy(owner["spec"]["template"]["spec"])}  # fmt: skip


class Owners:
    def __init__(self, *objects: Mapping[str, Any]) -> None:
        self.objects = {(o["apiVersion"], o["kind"], o["metadata"]["namespace"],
                         o["metadata"]["name"]): o for o in objects}  # fmt: skip

    def __call__(self, api_version: str, kind: str, namespace: str, name: str) -> Any:
        return self.objects.get((api_version, kind, namespace, name))


def policy(*owners: Mapping[str, Any]) -> Policy:
    """What serve builds: a capacity fed by the view, the config counting `dra:*` as
    GPUs, owners asking their claims' devices (cli/serve.py, server/app.py)."""
    sink = Sink()
    view = DeviceView(sink)
    listed(view, sink)
    config = with_device_names(Config())
    capacity = Capacity.from_nodes(list(sink.nodes.values()), config)
    return Policy(capacity=capacity, lookup=view.owners(Owners(*owners)), config=config,
                  devices=view)


def review(obj: Mapping[str, Any], kind: tuple[str, str, str], *, dry_run: bool = False
           ) -> admission.Review:
    group, version, kind_name = kind
    return parse_review(json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": group, "version": version, "kind": kind_name},
                    "resource": {"group": group, "version": version,
                                 "resource": kind_name.lower() + "s"},
                    "namespace": NAMESPACE, "operation": "CREATE", "object": obj,
                    "dryRun": dry_run, "userInfo": {"username": "alice"}}}).encode())  # fmt: skip


JOB_KIND = ("batch", "v1", "Job")


def test_five_workers_of_eight_claimed_gpus_on_four_nodes_of_eight_are_refused_with_the_numbers(
) -> None:
    for dry_run in (False, True):
        answer = admission.validate(review(job("huge", 5), JOB_KIND, dry_run=dry_run), policy())
        response = answer.review["response"]
        assert response["allowed"] is False
        message = response["status"]["message"]
        assert ("needs 5 \N{MULTIPLICATION SIGN} 8 devices of DeviceClass gpu.example.com "
                "= 40; the nodes it may use hold at most 32 (4 nodes: 8+8+8+8)") in message, message
        assert "dra:" not in message  # the internal resource name is never shown


def test_a_job_of_four_workers_of_eight_claimed_gpus_on_four_nodes_of_eight_is_admitted() -> None:
    answer = admission.validate(review(job("fits", 4), JOB_KIND), policy())
    assert answer.review["response"]["allowed"] is True
    assert answer.outcome == "allowed"  # judged as a gang, not ignored as asking nothing


def test_a_pod_of_a_dra_job_that_can_never_fit_is_refused_by_the_pod_webhooks_too() -> None:
    # The Job controller's pods reach the pod webhooks; their gang is read from the Job,
    # whose template asks its devices only through the claim.
    owner = job("huge", 5)
    data = review(pod_of(owner), ("", "v1", "Pod"))
    for answer in (admission.mutate(data, policy(owner)), admission.validate(data, policy(owner))):
        response = answer.review["response"]
        assert response["allowed"] is False, answer.summary
        assert "40" in response["status"]["message"]


def test_a_pod_of_a_dra_job_that_fits_is_gated_and_its_claims_are_not_patched_in() -> None:
    owner = job("fits", 4)
    pod = pod_of(owner)
    answer = admission.mutate(review(pod, ("", "v1", "Pod")), policy(owner))
    response = answer.review["response"]
    assert response["allowed"] is True and answer.outcome == "patched", answer.summary
    ops = json.loads(base64.b64decode(response["patch"]))
    assert any(op["path"].startswith("/spec/schedulingGates") for op in ops), ops
    # The devices counted as limits are the view's; the pod must not ask `dra:*`
    # resources no node lists, or it would never schedule.
    assert not any("containers" in op["path"] or "dra:" in json.dumps(op["value"])
                   for op in ops), ops


def test_a_claim_whose_template_is_unknown_is_admitted_with_a_warning_saying_it_was_not_counted(
) -> None:
    unknown = job("unknown", 5)
    unknown["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "gone"
    answer = admission.validate(review(unknown, JOB_KIND), policy())
    response = answer.review["response"]
    assert response["allowed"] is True
    assert any("gone" in w and "not counted" in w for w in response["warnings"])


# --- shared ResourceClaims --------------------------------------------------------------


def shared_claim(name: str, count: int) -> dict[str, Any]:
    """A ResourceClaim (resource.k8s.io/v1) that pods name by `resourceClaimName`."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": count}}]}}}


def sharing_job(name: str, workers: int, claim: str, *, own: bool) -> dict[str, Any]:
    """A Job whose every worker names the ResourceClaim `claim` (PodResourceClaim
    `resourceClaimName`), and with `own` also claims 8 devices of its own."""
    obj = job(name, workers)
    claims = obj["spec"]["template"]["spec"]["resourceClaims"]
    shared = {"name": "shared", "resourceClaimName": claim}
    claims[:] = [*claims, shared] if own else [shared]
    return obj


def sharing_policy(*claims: Mapping[str, Any]) -> Policy:
    made = policy()
    view = made.devices
    assert isinstance(view, DeviceView)
    for obj in claims:
        view.claims.upsert(obj)
    view.claims.relisted({key(o) for o in claims})
    return made


def test_a_shared_claim_of_eight_named_by_five_workers_is_counted_once_and_admitted() -> None:
    # Charged to every pod it would be 5 x 8 = 40 on 32 devices: a false rejection.
    answer = admission.validate(review(sharing_job("together", 5, "rack", own=False), JOB_KIND),
                                sharing_policy(shared_claim("rack", 8)))
    assert answer.review["response"]["allowed"] is True, answer.review["response"]
    assert answer.outcome == "allowed"


def test_a_shared_claim_adds_its_devices_once_to_the_members_own_and_can_refuse() -> None:
    # 4 x 8 own devices + 8 shared = 40 on 32: refused. Before shared claims counted,
    # this was admitted (the shared claim's 8 devices were not seen).
    answer = admission.validate(review(sharing_job("over", 4, "rack", own=True), JOB_KIND),
                                sharing_policy(shared_claim("rack", 8)))
    response = answer.review["response"]
    assert response["allowed"] is False
    assert "40" in response["status"]["message"] and "32" in response["status"]["message"]


def test_a_shared_claim_not_yet_known_is_not_counted() -> None:
    answer = admission.validate(review(sharing_job("early", 4, "later", own=True), JOB_KIND),
                                sharing_policy())
    assert answer.review["response"]["allowed"] is True


def test_a_template_whose_request_selects_h100s_is_counted_on_the_h100_nodes_live() -> None:
    # Two nodes of 8 H100s and two of 8 A100s; a template whose request selects H100
    # (its own selectors, not its class's). Live, the Nodes are counted again for those
    # selectors once the template is seen: 3 x 8 is refused naming 24 and 16 (charged
    # against the whole class it was admitted, 24 <= 32), 2 x 8 admitted.
    sink = Sink()
    view = DeviceView(sink)
    names = [f"dra-node-{i}" for i in range(4)]
    for name in names:
        view.upsert(node(name))
    view.relisted({key(node(name)) for name in names})
    slices = [resource_slice(n, 8, product="H100" if i < 2 else "A100")
              for i, n in enumerate(names)]
    for obj in slices:
        view.slices.upsert(obj)
    view.slices.relisted({key(o) for o in slices})
    view.classes.upsert(DEVICE_CLASS)
    view.classes.relisted({key(DEVICE_CLASS)})
    view.templates.relisted(set())
    assert view.counted == frozenset()
    # The template arrives after the informers' first lists, as a user creates one.
    h100 = copy.deepcopy(TEMPLATE)
    h100["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": f"device.attributes['{DRIVER}'].productName == 'H100'"}}]
    view.templates.upsert(h100)
    assert len(view.counted) == 1
    (narrowed,) = view.counted
    assert [sink.nodes[n]["status"]["allocatable"].get(f"dra:{narrowed}") for n in names] == [
        "8", "8", None, None]
    config = with_device_names(Config())
    capacity = Capacity.from_nodes(list(sink.nodes.values()), config)

    def judged(workers: int) -> Any:
        policy_ = Policy(capacity=capacity, lookup=view.owners(Owners()), config=config,
                         devices=view)
        return admission.validate(review(job("h", workers), JOB_KIND), policy_).review[
            "response"]

    refused = judged(3)
    assert refused["allowed"] is False
    message = refused["status"]["message"]
    assert "24" in message and "16" in message and "matching the request's selectors" in message
    assert judged(2)["allowed"] is True
