"""batch/v1 Job: the gang is the pods that run at once (recognizers/job.py)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import (
    GPU,
    Lookup,
    gang_annotations,
    gpu_spec,
    job,
    no_lookup,
    pod,
    pod_from,
    template,
)

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.model import Source
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()


@pytest.mark.parametrize(
    ("parallelism", "completions", "indexed", "size"),
    [
        (4, None, False, 4),
        (4, None, True, 4),
        (4, 8, True, 4),
        (4, 4, False, 4),
        # fewer completions than parallelism: only that many pods ever run
        (8, 3, True, 3),
        (8, 2, False, 2),
        (None, None, False, 1),
    ],
)
def test_a_job_gang_is_its_simultaneous_pods(
    parallelism: int | None, completions: int | None, indexed: bool, size: int
) -> None:
    obj = job("train", 2, parallelism=parallelism, completions=completions, indexed=indexed)
    gangs = recognize_object(obj, no_lookup, CONFIG)
    if size < 2:
        assert gangs == []
        return
    [gang] = gangs
    assert gang.name == "train"
    assert gang.min_member == size
    assert gang.size == size
    assert gang.total_demand() == {GPU: 2 * size}
    assert gang.source == Source("batch/v1", "Job", "default", "train", "uid-train")
    assert gang.recognizer == "job"


def test_a_suspended_job_is_still_validated() -> None:
    [gang] = recognize_object(job(parallelism=3, suspend=True), no_lookup, CONFIG)
    assert gang.min_member == 3


def test_a_job_of_one_pod_is_not_a_gang_and_zero_parallelism_neither() -> None:
    assert recognize_object(job(parallelism=1), no_lookup, CONFIG) == []
    assert recognize_object(job(parallelism=0), no_lookup, CONFIG) == []


def test_explicit_annotations_on_the_template_win() -> None:
    tmpl = template(gpu_spec(1), annotations=gang_annotations("shared", 3))
    [gang] = recognize_object(job(parallelism=4, pod_template=tmpl), no_lookup, CONFIG)
    assert (gang.name, gang.min_member) == ("shared", 3)


def test_explicit_min_member_above_the_job_adds_members_not_seen() -> None:
    tmpl = template(gpu_spec(2), annotations=gang_annotations("multi-job", 6))
    [gang] = recognize_object(job(parallelism=2, pod_template=tmpl), no_lookup, CONFIG)
    assert gang.min_member == 6
    assert gang.size == 6
    # only the seen pods demand GPUs: nothing is guessed about the others
    assert gang.total_demand() == {GPU: 4}


def test_a_pod_of_a_known_job_gets_the_same_gang_as_the_job() -> None:
    owner = job("train", 1, parallelism=4)
    member = pod_from(owner["spec"]["template"], "train-0", owner=owner)
    membership = recognize_pod(member, Lookup(owner), CONFIG)
    assert membership is not None
    assert membership.role == "worker"
    assert membership.gang == recognize_object(owner, no_lookup, CONFIG)[0]


def test_a_pod_whose_job_is_unknown_is_not_sized_by_guessing() -> None:
    owner = job("train", 1, parallelism=4)
    member = pod_from(
        owner["spec"]["template"],
        "train-0",
        owner=owner,
        labels={"batch.kubernetes.io/job-name": "train"},
    )
    assert recognize_pod(member, no_lookup, CONFIG) is None


def test_a_pod_without_owner_or_keys_is_not_a_gang_member() -> None:
    assert recognize_pod(pod("lonely", gpu_spec(8)), no_lookup, CONFIG) is None


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda j: j["spec"].update(parallelism=-1), "spec.parallelism"),
        (lambda j: j["spec"].update(parallelism="4"), "spec.parallelism"),
        (lambda j: j["spec"].update(parallelism=True), "spec.parallelism"),
        (lambda j: j["spec"].update(parallelism=10**9), "spec.parallelism"),
        (lambda j: j["spec"].update(completions=1.5), "spec.completions"),
        (lambda j: j.pop("spec"), "spec"),
        (lambda j: j["spec"].pop("template"), "spec.template"),
        (lambda j: j["spec"]["template"].update(spec=[]), "spec.template.spec"),
        (
            lambda j: j["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].update(
                {GPU: "1.5"}
            ),
            'spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
        ),
        (lambda j: j.update(metadata=[]), "metadata"),
        (lambda j: j["metadata"].update(name=3), "metadata.name"),
    ],
)
def test_a_malformed_job_is_an_error_naming_the_field(mutate: Any, path: str) -> None:
    obj = job(parallelism=4)
    mutate(obj)
    with pytest.raises(InvalidObject) as error:
        recognize_object(obj, no_lookup, CONFIG)
    assert error.value.path == path


# --- Kueue partial admission ---------------------------------------------------------
# Shape: kubernetes-sigs/kueue v0.17.0 site/content/en/docs/tasks/run/jobs.md ("partial
# admission") and pkg/controller/jobs/job/job_controller.go (minPodsCount reads
# kueue.x-k8s.io/job-min-parallelism; Kueue may start the Job with that parallelism).

KUEUE_MIN = "kueue.x-k8s.io/job-min-parallelism"


def _partial(parallelism: int, minimum: str, gpus: int = 8) -> dict[str, Any]:
    obj = job("partial", gpus, parallelism=parallelism)
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
    obj["metadata"]["annotations"] = {KUEUE_MIN: minimum}
    return obj


def test_a_job_kueue_may_admit_partially_needs_only_its_minimum_parallelism() -> None:
    """parallelism 5 x 8 GPUs = 40 > 32, but Kueue may run it with 3 x 8 = 24."""
    [gang] = recognize_object(_partial(5, "3"), no_lookup, CONFIG)
    assert (gang.min_member, gang.size) == (3, 5)
    assert gang.min_member_demand() == {GPU: 24}


def test_the_kueue_minimum_makes_a_gang_of_40_gpus_fit_32() -> None:
    from gangkeeper.policies.admission.decision import validate_object
    from gangkeeper.policies.cluster.capacity import Capacity

    nodes = [{"metadata": {"name": f"n{i}"}, "status": {"allocatable": {GPU: "8"}}}
             for i in range(4)]
    capacity = Capacity.from_nodes(nodes, CONFIG)
    [full] = validate_object(job("full", 8, parallelism=5), capacity=capacity,
                             lookup=no_lookup, config=CONFIG)
    [partial] = validate_object(_partial(5, "3"), capacity=capacity,
                                lookup=no_lookup, config=CONFIG)
    assert not full.verdict.allowed
    assert partial.verdict.allowed


@pytest.mark.parametrize("suspend", [True, None])
def test_a_job_kueue_has_not_admitted_yet_needs_only_its_minimum(suspend: bool | None) -> None:
    """Suspended (as Kueue's webhook creates it) or a manifest without the field."""
    obj = _partial(5, "3")
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert (gang.min_member, gang.size) == (3, 5)


def test_a_job_kueue_admitted_partially_is_one_gang_of_the_parallelism_it_admitted() -> None:
    """Kueue admitted 4 of 5 and set parallelism 4 (RunWithPodSetsInfo): all 4 go together,
    not 3 of them (found on the real Kueue: 2 of 3 admitted workers bound on 2 free nodes)."""
    obj = _partial(4, "3")
    obj["spec"]["suspend"] = False
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert (gang.min_member, gang.size) == (4, 4)


@pytest.mark.parametrize("bad", ["three", "0", "-1"])
def test_a_bad_kueue_minimum_names_the_annotation(bad: str) -> None:
    with pytest.raises(InvalidObject) as error:
        recognize_object(_partial(5, bad), no_lookup, CONFIG)
    assert KUEUE_MIN in error.value.path
