"""Mutation plans: what each backend adds, idempotence, user values, and conflicts."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any

import pytest

from gangkeeper.policies.admission.mutation import group_name, label_value, plan_pod
from gangkeeper.policies.model import Backend, Gang, PodMembership, Role, Source
from gangkeeper.policies.settings.config import Config

LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def membership(name: str = "llama-ft", role: str = "worker", min_member: int = 4) -> PodMembership:
    gang = Gang(
        namespace="team",
        name=name,
        min_member=min_member,
        roles=(Role(role, 4, {"nvidia.com/gpu": 1}),),
        source=Source("kubeflow.org/v1", "PyTorchJob", "team", name, uid="uid-1"),
    )
    return PodMembership(gang=gang, role=role)


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "llama-ft-worker-0", "namespace": "team", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "i"}], **spec},
    }


def mutated(backend: Backend, source: dict[str, Any] | None = None) -> dict[str, Any]:
    config = Config(backend=backend)
    plan = plan_pod(source or pod(), membership(), config, "team")
    assert plan.outcome == "mutate"
    return plan.apply(source or pod())


def test_gate_backend_adds_gang_keys_and_the_gate() -> None:
    result = mutated("gate")
    labels, annotations = result["metadata"]["labels"], result["metadata"]["annotations"]
    assert labels == {"app": "x", "gangkeeper.io/gang": "llama-ft", "gangkeeper.io/role": "worker"}
    assert annotations["gangkeeper.io/min-member"] == "4"
    assert annotations["gangkeeper.io/gang-name"] == "llama-ft"
    assert annotations["gangkeeper.io/backend"] == "gate"
    assert json.loads(annotations["gangkeeper.io/owner"]) == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "llama-ft",
        "uid": "uid-1",
    }
    assert result["spec"]["schedulingGates"] == [{"name": "gangkeeper.io/gang"}]
    assert "schedulerName" not in result["spec"]


@pytest.mark.parametrize(
    ("backend", "where", "key", "scheduler"),
    [
        ("coscheduling", "labels", "scheduling.x-k8s.io/pod-group", "scheduler-plugins-scheduler"),
        ("volcano", "annotations", "scheduling.k8s.io/group-name", "volcano"),
    ],
)
def test_podgroup_backends_name_the_group_and_their_scheduler(
    backend: Backend, where: str, key: str, scheduler: str
) -> None:
    result = mutated(backend)
    assert result["metadata"][where][key] == "llama-ft"
    assert result["spec"]["schedulerName"] == scheduler
    assert {"name": "gangkeeper.io/gang"} in result["spec"]["schedulingGates"]


def test_native_backend_sets_the_scheduling_group() -> None:
    result = mutated("native")
    assert result["spec"]["schedulingGroup"] == {"podGroupName": "llama-ft"}
    assert "schedulerName" not in result["spec"]


def test_scheduler_name_comes_from_config() -> None:
    config = Config(backend="coscheduling", scheduler_names={"coscheduling": "gang-sched"})
    plan = plan_pod(pod(), membership(), config, "team")
    assert plan.apply(pod())["spec"]["schedulerName"] == "gang-sched"


def test_namespace_override_picks_the_backend() -> None:
    config = Config(backend="gate", namespace_backends={"team": "volcano"})
    assert plan_pod(pod(), membership(), config, "team").backend == "volcano"
    assert plan_pod(pod(), membership(), config, "other").backend == "gate"


@pytest.mark.parametrize("backend", ["gate", "coscheduling", "volcano", "native"])
def test_planning_on_a_mutated_pod_adds_nothing(backend: Backend) -> None:
    config = Config(backend=backend)
    once = plan_pod(pod(), membership(), config, "team").apply(pod())
    again = plan_pod(once, membership(), config, "team")
    assert again.outcome == "unchanged"
    assert not again.changes
    assert again.apply(once) == once


def test_apply_never_modifies_its_input() -> None:
    original = pod()
    before = copy.deepcopy(original)
    plan_pod(original, membership(), Config(backend="volcano"), "team").apply(original)
    assert original == before


def test_values_the_user_set_are_kept() -> None:
    source = pod(schedulerName="default-scheduler")
    source["metadata"]["labels"]["gangkeeper.io/role"] = "trainer"
    source["metadata"]["annotations"] = {"gangkeeper.io/min-member": "2"}
    result = plan_pod(source, membership(), Config(), "team").apply(source)
    assert result["metadata"]["labels"]["gangkeeper.io/role"] == "trainer"
    assert result["metadata"]["annotations"]["gangkeeper.io/min-member"] == "2"
    assert result["spec"]["schedulerName"] == "default-scheduler"


def test_existing_scheduling_gates_are_kept_and_ours_appended() -> None:
    source = pod(schedulingGates=[{"name": "example.com/quota"}])
    result = plan_pod(source, membership(), Config(), "team").apply(source)
    assert result["spec"]["schedulingGates"] == [
        {"name": "example.com/quota"},
        {"name": "gangkeeper.io/gang"},
    ]


@pytest.mark.parametrize(
    ("where", "key", "system"),
    [
        ("labels", "kueue.x-k8s.io/pod-group-name", "Kueue"),
        ("annotations", "kueue.x-k8s.io/pod-group-total-count", "Kueue"),
        ("annotations", "scheduling.k8s.io/group-name", "Volcano"),
        ("annotations", "volcano.sh/job-name", "Volcano"),
        ("labels", "scheduling.x-k8s.io/pod-group", "scheduler-plugins"),
        ("labels", "pod-group.scheduling.sigs.k8s.io", "scheduler-plugins"),
        ("annotations", "yunikorn.apache.org/task-group-name", "YuniKorn"),
        ("labels", "applicationId", "YuniKorn"),
    ],
)
@pytest.mark.parametrize("policy", ["skip", "reject"])
def test_other_gang_systems_keys_skip_or_reject_with_the_keys_named(
    where: str, key: str, system: str, policy: str
) -> None:
    source = pod()
    source["metadata"].setdefault(where, {})[key] = "their-group"
    config = Config(on_conflict=policy)  # type: ignore[arg-type]
    plan = plan_pod(source, membership(), config, "team")
    assert plan.outcome == policy
    assert f"{system} {where[:-1]} {key}=their-group" in plan.message
    assert not plan.changes
    assert plan.apply(source) == source


def test_our_own_backend_key_with_our_value_is_not_a_conflict() -> None:
    source = pod()
    source["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "llama-ft"
    plan = plan_pod(source, membership(), Config(backend="coscheduling"), "team")
    assert plan.outcome == "mutate"
    assert "scheduling.x-k8s.io/pod-group" not in plan.labels


@pytest.mark.parametrize("backend", ["gate", "coscheduling"])
@pytest.mark.parametrize("policy", ["skip", "reject"])
def test_a_gang_another_system_keys_is_a_conflict_even_with_our_key_and_value(
    backend: Backend, policy: str
) -> None:
    """Trainer's podGroupPolicy.coscheduling labels the pods with a PodGroup named after
    the TrainJob: on the coscheduling backend that is gangkeeper's own key and value."""
    source = pod()
    source["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "llama-ft"
    theirs = membership()
    theirs = PodMembership(
        gang=dataclasses.replace(theirs.gang, keyed_by="Kubeflow Trainer podGroupPolicy.x"),
        role=theirs.role,
    )
    config = Config(backend=backend, on_conflict=policy)  # type: ignore[arg-type]
    plan = plan_pod(source, theirs, config, "team")
    assert plan.outcome == policy
    assert "scheduler-plugins label scheduling.x-k8s.io/pod-group=llama-ft" in plan.message
    assert "Kubeflow Trainer podGroupPolicy.x" in plan.message
    assert plan.apply(source) == source


def test_a_native_scheduling_group_of_another_name_is_a_conflict() -> None:
    source = pod(schedulingGroup={"podGroupName": "theirs"})
    plan = plan_pod(source, membership(), Config(backend="native"), "team")
    assert plan.outcome == "skip"
    assert "spec.schedulingGroup.podGroupName=theirs" in plan.message


@pytest.mark.parametrize("policy", ["skip", "reject"])
def test_a_foreign_scheduler_is_a_conflict(policy: str) -> None:
    source = pod(schedulerName="my-scheduler")
    plan = plan_pod(source, membership(), Config(on_conflict=policy), "team")  # type: ignore[arg-type]
    assert plan.outcome == policy
    assert "my-scheduler" in plan.message
    assert "foreign scheduler" in plan.message


def test_the_backend_scheduler_set_by_the_user_is_fine() -> None:
    source = pod(schedulerName="volcano")
    plan = plan_pod(source, membership(), Config(backend="volcano"), "team")
    assert plan.outcome == "mutate"
    assert plan.scheduler_name is None


def test_a_pod_bound_to_a_node_is_skipped() -> None:
    plan = plan_pod(pod(nodeName="n1"), membership(), Config(), "team")
    assert plan.outcome == "skip"
    assert "n1" in plan.message


@pytest.mark.parametrize(
    "name",
    [
        "llama-ft",
        "a" * 63,
        "a" * 64,
        "x" * 300,
        "UPPER_case.name",
        "-leading-and-trailing-",
        "job/with/slashes",
        "___",
    ],
)
def test_gang_label_values_are_valid_label_values_and_dns_names(name: str) -> None:
    value = group_name(name)
    assert len(value) <= 63
    assert LABEL_VALUE.fullmatch(value)
    assert DNS_NAME.fullmatch(value)  # also the PodGroup's name
    role = label_value(name)
    assert len(role) <= 63
    assert LABEL_VALUE.fullmatch(role)


def test_role_names_keep_their_case() -> None:
    assert label_value("Worker") == "Worker"
    assert group_name("Worker") != "Worker"
    assert plan_pod(pod(), membership(role="Master"), Config(), "team").labels == {
        "gangkeeper.io/gang": "llama-ft",
        "gangkeeper.io/role": "Master",
    }


@pytest.mark.parametrize("shorten", [label_value, group_name])
def test_short_valid_names_are_kept_and_long_ones_get_a_stable_distinct_suffix(
    shorten: Any,
) -> None:
    assert shorten("llama-ft") == "llama-ft"
    long_a, long_b = "p" * 80 + "a", "p" * 80 + "b"
    assert shorten(long_a) == shorten(long_a)
    assert shorten(long_a) != shorten(long_b)
    assert shorten(long_a).startswith("ppp")


def test_long_gang_names_are_shortened_in_labels_but_kept_whole_in_the_annotation() -> None:
    name = "very-long-" * 10
    source = pod()
    result = plan_pod(source, membership(name=name), Config(backend="coscheduling"), "team").apply(
        source
    )
    assert result["metadata"]["annotations"]["gangkeeper.io/gang-name"] == name
    short = result["metadata"]["labels"]["gangkeeper.io/gang"]
    assert len(short) <= 63
    assert result["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == short


def test_odd_metadata_types_are_treated_as_absent_not_crashed_on() -> None:
    source = pod()
    source["metadata"]["labels"] = None
    source["metadata"]["annotations"] = "oops"
    plan = plan_pod(source, membership(), Config(), "team")
    assert plan.outcome == "mutate"
    assert plan.apply(source)["metadata"]["labels"]["gangkeeper.io/gang"] == "llama-ft"
