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

from gangkeeper.policies.config import Config
from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.model import Source
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod

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
