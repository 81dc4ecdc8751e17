"""KubeRay's RayCluster, RayJob and RayService: one gang per Ray cluster (recognizers/ray.py).

The objects are plain dicts shaped from KubeRay v1.5.0's types
(`ray-operator/apis/ray/v1/raycluster_types.go`: `RayClusterSpec`, `HeadGroupSpec`,
`WorkerGroupSpec`; `rayjob_types.go`: `RayJobSpec`; `rayservice_types.go`:
`RayServiceSpec`) and its pods from `ray-operator/controllers/ray/common/pod.go`
(`labelPod`). The counts are those of `utils/util.go` (`GetWorkerGroupDesiredReplicas`,
`CalculateDesiredReplicas`, `CalculateMinReplicas`) that `volcano_scheduler.go`'s
`calculatePodGroupParams` gives KubeRay's own PodGroup.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from builders.gangs import node
from builders.workloads import GPU, Lookup, no_lookup
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.admission.decision import validate_object
from gangkeeper.policies.admission.mutation import plan_pod
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.model import Gang, PodMembership
from gangkeeper.policies.recognizers import ray
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
API = "ray.io/v1"
NS = "ml"


def template(gpus: int = 0, cpu: str = "1", **metadata: Any) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": cpu, "memory": "2G"}
    if gpus:
        limits[GPU] = gpus
    return {
        "metadata": metadata,
        "spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.46.0",
                                 "resources": {"limits": limits, "requests": dict(limits)}}]},
    }


def group(name: str, replicas: int | None = 1, *, gpus: int = 8, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"groupName": name, "rayStartParams": {}, "template": template(gpus)}
    if replicas is not None:
        body["replicas"] = replicas
    body.update(fields)
    return body


def cluster_spec(*groups: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "rayVersion": "2.46.0",
        "headGroupSpec": {"rayStartParams": {}, "template": template()},
        "workerGroupSpecs": list(groups),
        **fields,
    }


def raycluster(name: str, *groups: dict[str, Any], labels: dict[str, str] | None = None,
               owner: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}"}
    if labels:
        metadata["labels"] = labels
    if owner:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": API, "kind": "RayCluster", "metadata": metadata,
            "spec": cluster_spec(*groups, **fields)}


def rayjob(name: str, *groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"entrypoint": "python /home/ray/samples/sample_code.py",
                            "rayClusterSpec": cluster_spec(*groups)}
    body.update(spec)
    return {"apiVersion": API, "kind": "RayJob",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"}, "spec": body}


def rayservice(name: str, *groups: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "RayService",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"serveConfigV2": "applications: []",
                     "rayClusterConfig": cluster_spec(*groups)}}


def ref(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def ray_pod(cluster: dict[str, Any], group_name: str = "headgroup", *,
            labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
            **spec: Any) -> dict[str, Any]:
    """A pod as KubeRay's `labelPod` labels it and owns it by its RayCluster."""
    name = cluster["metadata"]["name"]
    node_type = "head" if group_name == "headgroup" else "worker"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{name}-{node_type}-",
            "namespace": NS,
            "labels": {
                "ray.io/is-ray-node": "yes", "ray.io/cluster": name,
                "ray.io/node-type": node_type, "ray.io/group": group_name,
                "ray.io/identifier": f"{name}-{node_type}",
                "app.kubernetes.io/name": "kuberay",
                "app.kubernetes.io/created-by": "kuberay-operator",
                **(labels or {}),
            },
            "annotations": annotations or {},
            "ownerReferences": [ref(cluster)],
        },
        "spec": {**template(8 if node_type == "worker" else 0)["spec"], **spec},
    }


def one(obj: dict[str, Any], lookup: Any = no_lookup, config: Config = CONFIG) -> Gang:
    [gang] = recognize_object(obj, lookup, config)
    return gang


def roles(gang: Gang) -> dict[str, int]:
    return {r.name: r.count for r in gang.roles}


# --- sizing -------------------------------------------------------------------------------


def test_a_cluster_is_its_head_plus_every_worker_groups_replicas() -> None:
    obj = raycluster("llm", group("gpu", 2), group("cpu", 3, gpus=0))
    gang = one(obj)
    assert (gang.name, gang.namespace) == ("llm", NS)
    assert roles(gang) == {"head": 1, "gpu": 2, "cpu": 3}
    assert gang.min_member == gang.size == 6
    assert gang.total_demand() == {GPU: 16}
    source = (gang.source.kind, gang.source.name, gang.recognizer)
    assert source == ("RayCluster", "llm", "raycluster")
    assert gang.keyed_by == ""


@pytest.mark.parametrize(
    ("replicas", "bounds", "expected"),
    [
        (5, {"minReplicas": 1, "maxReplicas": 3}, 3),  # above maxReplicas
        (0, {"minReplicas": 2, "maxReplicas": 4}, 2),  # below minReplicas
        (None, {"minReplicas": 2, "maxReplicas": 5}, 2),  # replicas unset: the CRD's 0
        (3, {"minReplicas": 4, "maxReplicas": 2}, 2),  # min > max: maxReplicas wins
        (2, {}, 2),  # bounds unset: 0 and maxInt32
        (7, {"maxReplicas": 2147483647}, 7),  # the CRD's default written out is a bound
    ],
)
def test_replicas_are_clamped_to_min_and_max_replicas(
    replicas: int | None, bounds: dict[str, int], expected: int
) -> None:
    gang = one(raycluster("c", group("gpu", replicas, **bounds)))
    assert roles(gang) == {"head": 1, "gpu": expected}
    assert gang.min_member == 1 + expected


def test_each_replica_of_a_multi_host_group_is_num_of_hosts_pods() -> None:
    gang = one(raycluster("tpu", group("tpu", 2, numOfHosts=4, gpus=0), group("gpu", 1)))
    assert roles(gang) == {"head": 1, "tpu": 8, "gpu": 1}
    assert gang.min_member == 10


def test_a_suspended_worker_group_is_left_out() -> None:
    gang = one(raycluster("c", group("a", 2), group("b", 3, suspend=True)))
    assert roles(gang) == {"head": 1, "a": 2}
    assert gang.min_member == 3


def test_a_head_alone_is_not_a_gang() -> None:
    assert recognize_object(raycluster("solo"), no_lookup, CONFIG) == []
    assert recognize_object(raycluster("idle", group("a", 0)), no_lookup, CONFIG) == []


def test_with_autoscaling_min_member_is_the_minimum_replicas_times_hosts_plus_the_head() -> None:
    obj = raycluster(
        "auto",
        group("a", 3, minReplicas=1, maxReplicas=5, numOfHosts=2),
        group("b", 4, minReplicas=2, maxReplicas=10),
        enableInTreeAutoscaling=True,
    )
    gang = one(obj)
    assert roles(gang) == {"head": 1, "a": 6, "b": 4}
    assert (gang.min_member, gang.size) == (1 * 2 + 2 + 1, 11)


def test_with_autoscaling_the_head_requests_the_autoscaler_container_too() -> None:
    plain = one(raycluster("c", group("a", 2)))
    auto = one(raycluster("c", group("a", 2), enableInTreeAutoscaling=True))
    head = {r.name: r for r in plain.roles}["head"]
    scaled = {r.name: r for r in auto.roles}["head"]
    # BuildAutoscalerContainer: 500m CPU, 512Mi (the head's own container asks 1 CPU).
    assert (head.requests["cpu"], scaled.requests["cpu"]) == (1000, 1500)
    assert scaled.requests["memory"] - head.requests["memory"] == 512 * 2**20
    options = {"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    custom = one(raycluster("c", group("a", 2), enableInTreeAutoscaling=True,
                            autoscalerOptions=options))
    assert {r.name: r for r in custom.roles}["head"].requests["cpu"] == 3000
    none = one(raycluster("c", group("a", 2), enableInTreeAutoscaling=True,
                          autoscalerOptions={"resources": {}}))
    assert {r.name: r for r in none.roles}["head"].requests["cpu"] == 1000  # replaced whole


def test_explicit_gangkeeper_annotations_on_a_template_still_win() -> None:
    obj = raycluster("c", group("a", 4))
    obj["spec"]["workerGroupSpecs"][0]["template"]["metadata"] = {
        "annotations": {"gangkeeper.io/min-member": "3"}
    }
    assert one(obj).min_member == 3


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda o: o["spec"]["workerGroupSpecs"][0].update(replicas="2"),
         "spec.workerGroupSpecs[0].replicas"),
        (lambda o: o["spec"]["workerGroupSpecs"][0].update(maxReplicas=-1),
         "spec.workerGroupSpecs[0].maxReplicas"),
        (lambda o: o["spec"]["workerGroupSpecs"][0].update(numOfHosts=True),
         "spec.workerGroupSpecs[0].numOfHosts"),
        (lambda o: o["spec"]["workerGroupSpecs"][0].pop("groupName"),
         "spec.workerGroupSpecs[0].groupName"),
        (lambda o: o["spec"]["workerGroupSpecs"][1].update(groupName="a"),
         "spec.workerGroupSpecs[1].groupName"),
        (lambda o: o["spec"]["workerGroupSpecs"][1].update(groupName="Head"),
         "spec.workerGroupSpecs[1].groupName"),
        (lambda o: o["spec"].pop("headGroupSpec"), "spec.headGroupSpec"),
    ],
)
def test_a_malformed_field_is_an_error_naming_it(change: Any, field: str) -> None:
    obj = raycluster("c", group("a", 2), group("b", 1))
    change(obj)
    with pytest.raises(InvalidObject) as raised:
        recognize_object(obj, no_lookup, CONFIG)
    assert raised.value.path == field


def test_a_version_gangkeeper_does_not_read_is_refused() -> None:
    obj = raycluster("c", group("a", 2))
    obj["apiVersion"] = "ray.io/v1alpha1"
    with pytest.raises(InvalidObject, match=r"ray.io/v1alpha1 is not a version"):
        recognize_object(obj, no_lookup, CONFIG)


# --- RayJob and RayService --------------------------------------------------------------------


def test_a_rayjob_is_the_gang_of_its_ray_cluster_spec() -> None:
    gang = one(rayjob("train", group("gpu", 4, gpus=4)))
    assert roles(gang) == {"head": 1, "gpu": 4}
    assert (gang.source.kind, gang.name, gang.recognizer) == ("RayJob", "train", "rayjob")


def test_a_rayjob_with_a_cluster_selector_creates_no_cluster_and_is_no_gang() -> None:
    obj = rayjob("reuse", group("gpu", 4), clusterSelector={"ray.io/cluster": "raycluster-kuberay"})
    del obj["spec"]["rayClusterSpec"]
    assert recognize_object(obj, no_lookup, CONFIG) == []
    with_spec = rayjob("reuse", group("gpu", 4), clusterSelector={"ray.io/cluster": "x"})
    assert recognize_object(with_spec, no_lookup, CONFIG) == []  # the selector wins


def test_a_rayjob_with_neither_cluster_spec_nor_selector_is_an_error_naming_the_field() -> None:
    obj = rayjob("nothing")
    del obj["spec"]["rayClusterSpec"]
    with pytest.raises(InvalidObject) as raised:
        recognize_object(obj, no_lookup, CONFIG)
    assert raised.value.path == "spec.rayClusterSpec"


def test_a_sidecar_mode_rayjob_adds_its_submitter_to_the_head() -> None:
    k8s_job = one(rayjob("j", group("gpu", 2), submissionMode="K8sJobMode"))
    sidecar = one(rayjob("j", group("gpu", 2), submissionMode="SidecarMode"))
    assert roles(k8s_job) == roles(sidecar) == {"head": 1, "gpu": 2}  # never a member
    # GetDefaultSubmitterContainer requests 500m CPU and 200Mi.
    head = {r.name: r for r in sidecar.roles}["head"]
    assert head.requests["cpu"] == 1500


def test_a_rayservice_is_the_gang_of_its_ray_cluster_config() -> None:
    gang = one(rayservice("serve", group("gpu", 2)))
    assert roles(gang) == {"head": 1, "gpu": 2}
    assert (gang.source.kind, gang.recognizer) == ("RayService", "rayservice")


# --- pods -------------------------------------------------------------------------------------


def test_a_pod_of_a_raycluster_is_a_member_in_its_group_role() -> None:
    cluster = raycluster("llm", group("gpu", 2), group("cpu", 1, gpus=0))
    lookup = Lookup(cluster)
    head = recognize_pod(ray_pod(cluster), lookup, CONFIG)
    worker = recognize_pod(ray_pod(cluster, "gpu"), lookup, CONFIG)
    assert head is not None and worker is not None
    assert (head.role, worker.role) == ("head", "gpu")
    assert head.gang == worker.gang == one(cluster)
    assert (worker.gang.name, worker.gang.min_member) == ("llm", 4)


def test_a_pod_of_a_group_with_no_members_or_of_an_unknown_cluster_is_not_one() -> None:
    cluster = raycluster("llm", group("gpu", 2), group("idle", 0))
    assert recognize_pod(ray_pod(cluster, "idle"), Lookup(cluster), CONFIG) is None
    assert recognize_pod(ray_pod(cluster, "gpu"), no_lookup, CONFIG) is None


@pytest.mark.parametrize("owner", ["RayJob", "RayService"])
def test_a_pod_of_a_cluster_a_rayjob_or_rayservice_made_has_it_as_top_level_owner(
    owner: str,
) -> None:
    parent = rayjob("train", group("gpu", 2)) if owner == "RayJob" else rayservice(
        "serve", group("gpu", 2))
    # The controller names the cluster <name>-<5 random letters> and owns it.
    made = raycluster(f"{parent['metadata']['name']}-x7k2p", group("gpu", 2), owner=ref(parent))
    membership = recognize_pod(ray_pod(made, "gpu"), Lookup(parent, made), CONFIG)
    assert membership is not None
    gang = membership.gang
    assert (gang.source.kind, gang.source.name, gang.source.uid) == (
        owner, parent["metadata"]["name"], parent["metadata"]["uid"])
    assert gang.recognizer == owner.lower()
    # A RayJob runs one cluster at a time and names the gang; a RayService may run two.
    expected = parent["metadata"]["name"] if owner == "RayJob" else made["metadata"]["name"]
    assert gang.name == expected
    assert (membership.role, gang.min_member) == ("gpu", 3)


def test_the_active_and_pending_clusters_of_an_upgrading_rayservice_are_two_gangs() -> None:
    parent = rayservice("serve", group("gpu", 2))
    active = raycluster("serve-abcde", group("gpu", 2), owner=ref(parent))
    pending = raycluster("serve-fghij", group("gpu", 3), owner=ref(parent))
    lookup = Lookup(parent, active, pending)
    gangs = [recognize_pod(ray_pod(c, "gpu"), lookup, CONFIG) for c in (active, pending)]
    assert [(m.gang.name, m.gang.size) for m in gangs if m] == [
        ("serve-abcde", 3), ("serve-fghij", 4)]


def test_an_explicit_gang_name_on_a_rayjob_clusters_template_still_wins() -> None:
    parent = rayjob("train", group("gpu", 2))
    made = raycluster("train-x7k2p", group("gpu", 2), owner=ref(parent))
    made["spec"]["headGroupSpec"]["template"]["metadata"] = {
        "annotations": {"gangkeeper.io/gang-name": "shared"}}
    membership = recognize_pod(ray_pod(made), Lookup(parent, made), CONFIG)
    assert membership is not None and membership.gang.name == "shared"


def test_the_submitter_pod_of_a_rayjob_is_not_a_member() -> None:
    parent = rayjob("train", group("gpu", 2), submissionMode="K8sJobMode")
    made = raycluster("train-x7k2p", group("gpu", 2), owner=ref(parent))
    # createNewK8sJob: a batch/v1 Job of the RayJob's name, owned by the RayJob.
    submitter_job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train", "namespace": NS, "uid": "uid-job",
                     "labels": {"ray.io/originated-from-cr-name": "train",
                                "ray.io/originated-from-crd": "RayJob"},
                     "ownerReferences": [ref(parent)]},
        "spec": {"backoffLimit": 2, "template": template(cpu="500m")},
    }
    submitter = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "train-", "namespace": NS,
                     "labels": {"batch.kubernetes.io/job-name": "train"},
                     "ownerReferences": [ref(submitter_job)]},
        "spec": template(cpu="500m")["spec"],
    }
    lookup = Lookup(parent, made, submitter_job)
    assert recognize_pod(submitter, lookup, CONFIG) is None
    for recognizer in ray.KINDS:
        assert recognizer.recognize_pod(submitter, lookup, CONFIG) is None


def test_each_kind_claims_only_pods_whose_top_level_owner_is_of_its_kind() -> None:
    parent = rayjob("train", group("gpu", 2))
    made = raycluster("train-x7k2p", group("gpu", 2), owner=ref(parent))
    alone = raycluster("alone", group("gpu", 2))
    lookup = Lookup(parent, made, alone)
    claimed = {
        name: [r.name for r in ray.KINDS if r.recognize_pod(ray_pod(c, "gpu"), lookup, CONFIG)]
        for name, c in (("made", made), ("alone", alone))
    }
    assert claimed == {"made": ["rayjob"], "alone": ["raycluster"]}


# --- KubeRay's own gang integration: skipped or refused under onConflict -----------------------


@pytest.mark.parametrize(
    ("where", "key", "value", "plugin"),
    [
        ("labels", "scheduling.x-k8s.io/pod-group", "llm", "scheduler-plugins"),
        ("annotations", "scheduling.k8s.io/group-name", "ray-llm-pg", "volcano"),
        ("annotations", "yunikorn.apache.org/task-groups", "[]", "yunikorn"),
        ("labels", "kai.scheduler/queue", "team-a", "kai-scheduler"),
    ],
)
@pytest.mark.parametrize("policy", ["skip", "reject"])
def test_a_pod_keyed_by_a_kuberay_batch_scheduler_plugin_is_left_to_it_naming_the_key(
    where: str, key: str, value: str, plugin: str, policy: str
) -> None:
    cluster = raycluster("llm", group("gpu", 2))
    pod = ray_pod(cluster, "gpu", **{where: {key: value}})  # type: ignore[arg-type]
    membership = recognize_pod(pod, Lookup(cluster), CONFIG)
    assert membership is not None
    kind = "label" if where == "labels" else "annotation"
    assert f"{plugin}: {kind} {key} on the pod" in membership.gang.keyed_by
    # The coscheduling backend writes the very label and value scheduler-plugins wrote
    # (the cluster's name): the gang is still KubeRay's.
    config = Config(backend="coscheduling", on_conflict=policy)  # type: ignore[arg-type]
    plan = plan_pod(pod, membership, config, NS)
    assert plan.outcome == policy
    assert key in plan.message
    assert plan.apply(pod) == pod


@pytest.mark.parametrize(
    ("where", "key", "plugin"),
    [
        ("labels", "ray.io/gang-scheduling-enabled", "scheduler-plugins or yunikorn"),
        ("labels", "kai.scheduler/queue", "kai-scheduler"),
        ("annotations", "yunikorn.apache.org/task-groups", "yunikorn"),
    ],
)
def test_a_ray_object_whose_plugin_keys_its_pods_is_refused_under_reject_naming_the_key(
    where: str, key: str, plugin: str
) -> None:
    obj = rayjob("train", group("gpu", 2))
    obj["metadata"][where] = {key: "true"}
    gang = one(obj)
    assert f"{plugin}" in gang.keyed_by and f"{key} on the RayJob" in gang.keyed_by
    capacity = Capacity.from_nodes([node("n0", 8), node("n1", 8)])
    [skipped] = validate_object(obj, capacity=capacity, lookup=no_lookup, config=CONFIG)
    assert skipped.verdict.allowed  # onConflict: skip (the default) leaves it to KubeRay
    reject = Config(on_conflict="reject")
    [refused] = validate_object(obj, capacity=capacity, lookup=no_lookup, config=reject)
    assert not refused.verdict.allowed and refused.verdict.code == "conflict"
    assert key in refused.verdict.reason


def test_plugin_keys_written_on_a_template_are_named_with_its_path() -> None:
    obj = raycluster("c", group("gpu", 2))
    obj["spec"]["workerGroupSpecs"][0]["template"]["metadata"] = {
        "annotations": {"scheduling.k8s.io/group-name": "mine"}
    }
    assert one(obj).keyed_by == (
        "KubeRay's batch scheduler (volcano: annotation scheduling.k8s.io/group-name on "
        "spec.workerGroupSpecs[0].template)"
    )


@pytest.mark.parametrize("scheduler", ["volcano", "yunikorn", "kai-scheduler"])
def test_a_pod_kuberay_gave_a_batch_schedulers_name_is_a_foreign_scheduler(scheduler: str) -> None:
    cluster = raycluster("llm", group("gpu", 2))
    pod = ray_pod(cluster, "gpu", schedulerName=scheduler)
    membership = recognize_pod(pod, Lookup(cluster), CONFIG)
    assert isinstance(membership, PodMembership)
    plan = plan_pod(pod, membership, Config(on_conflict="reject"), NS)
    assert plan.outcome == "reject" and repr(scheduler) in plan.message


# --- feasibility ----------------------------------------------------------------------------------


def test_a_cluster_whose_head_and_workers_cannot_be_packed_is_refused_with_numbers() -> None:
    capacity = Capacity.from_nodes([node(f"n{i}", 8) for i in range(4)])
    fits = raycluster("fits", group("gpu", 4))
    [admitted] = validate_object(fits, capacity=capacity, lookup=no_lookup, config=CONFIG)
    assert admitted.verdict.allowed
    too_big = raycluster("big", group("gpu", 5))
    [refused] = validate_object(too_big, capacity=capacity, lookup=no_lookup, config=CONFIG)
    assert not refused.verdict.allowed
    assert "40" in refused.verdict.reason and "32" in refused.verdict.reason


# --- capabilities ---------------------------------------------------------------------------------


def test_capabilities_are_declared_per_kind() -> None:
    assert {r.kind: r.requeue.how for r in ray.KINDS} == {
        "RayCluster": "suspend", "RayJob": "recreate", "RayService": "recreate"}
    assert all(r.pod_label_prefixes == ("ray.io/",) for r in ray.KINDS)
    assert [(rule.group, rule.resource) for r in ray.KINDS for rule in r.rules] == [
        ("ray.io", "rayclusters"), ("ray.io", "rayjobs"), ("ray.io", "rayservices")]


# --- properties -----------------------------------------------------------------------------------

GROUPS = st.lists(
    st.fixed_dictionaries(
        {"replicas": st.integers(0, 6), "minReplicas": st.integers(0, 6),
         "maxReplicas": st.integers(0, 6), "numOfHosts": st.integers(0, 3),
         "suspend": st.booleans()},
    ),
    min_size=0, max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(groups=GROUPS, autoscaling=st.booleans())
def test_min_member_is_at_most_the_members_and_all_of_them_without_autoscaling(
    groups: list[dict[str, Any]], autoscaling: bool
) -> None:
    specs = [group(f"g{i}", **copy.deepcopy(g)) for i, g in enumerate(groups)]
    obj = raycluster("p", *specs, enableInTreeAutoscaling=autoscaling)
    gangs = recognize_object(obj, no_lookup, CONFIG)
    expected_size = 1 + sum(
        0 if g["suspend"] else (
            g["maxReplicas"] if g["minReplicas"] > g["maxReplicas"]
            else min(max(g["replicas"], g["minReplicas"]), g["maxReplicas"])
        ) * g["numOfHosts"]
        for g in groups
    )
    if expected_size < 2:
        assert gangs == []
        return
    # KubeRay's CalculateMinReplicas: the head plus minReplicas x numOfHosts of every
    # group not suspended (computed here from the draw, not by the recogniser's code).
    expected_minimum = 1 + sum(
        0 if g["suspend"] else g["minReplicas"] * g["numOfHosts"] for g in groups
    )
    [gang] = gangs
    assert gang.size == expected_size
    if autoscaling:
        assert gang.min_member == min(expected_minimum, expected_size)
    else:
        assert gang.min_member == gang.size
