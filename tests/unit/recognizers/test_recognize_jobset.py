"""JobSet: Σ replicas x job parallelism, one role per replicatedJob (recognizers/jobset.py)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import (
    GPU,
    Lookup,
    jobset,
    jobset_pod,
    no_lookup,
    replicated_job,
    trainjob,
)

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()


def test_a_jobset_gang_sums_replicas_times_parallelism_per_replicated_job() -> None:
    obj = jobset(
        "ddp",
        replicated_job("driver", 1, 1, 0),
        replicated_job("workers", 3, 2, 4),
    )
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert gang.name == "ddp"
    assert gang.min_member == 7
    roles = {r.name: (r.count, dict(r.demand)) for r in gang.roles}
    assert roles == {"driver": (1, {}), "workers": (6, {GPU: 4})}
    assert gang.total_demand() == {GPU: 24}


def test_completions_below_parallelism_limit_each_job() -> None:
    obj = jobset("js", replicated_job("w", 2, 4, 1, completions=3))
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert gang.min_member == 6


def test_jobs_that_must_complete_first_are_not_gang_members() -> None:
    obj = jobset(
        "js",
        replicated_job("init", 1, 1, 0),
        replicated_job("workers", 1, 4, 2, depends_on=[("init", "Complete")]),
    )
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert [r.name for r in gang.roles] == ["workers"]
    assert gang.min_member == 4


def test_jobs_that_only_wait_for_ready_run_together() -> None:
    obj = jobset(
        "js",
        replicated_job("node", 1, 2, 1),
        replicated_job("launcher", 1, 1, 0, depends_on=[("node", "Ready")]),
    )
    [gang] = recognize_object(obj, no_lookup, CONFIG)
    assert gang.min_member == 3


def test_a_jobset_of_one_pod_is_not_a_gang() -> None:
    assert recognize_object(jobset("js", replicated_job("w", 1, 1)), no_lookup, CONFIG) == []


def test_a_pod_of_a_jobset_gets_the_jobset_gang_and_its_replicated_job_as_role() -> None:
    owner = jobset("js", replicated_job("driver", 1, 1, 0), replicated_job("workers", 2, 2, 1))
    member, child = jobset_pod(owner, "workers", 1)
    membership = recognize_pod(member, Lookup(owner, child), CONFIG)
    assert membership is not None
    assert membership.role == "workers"
    assert membership.gang == recognize_object(owner, no_lookup, CONFIG)[0]
    assert membership.gang.source.kind == "JobSet"


def test_a_jobset_pod_is_found_by_label_when_its_job_is_unknown() -> None:
    owner = jobset("js", replicated_job("workers", 2, 2, 1))
    member, _child = jobset_pod(owner, "workers")
    membership = recognize_pod(member, Lookup(owner), CONFIG)
    assert membership is not None
    assert membership.gang.name == "js"


def test_a_jobset_pod_without_the_jobset_is_not_sized() -> None:
    owner = jobset("js", replicated_job("workers", 2, 2, 1))
    member, child = jobset_pod(owner, "workers")
    assert recognize_pod(member, Lookup(child), CONFIG) is None


def test_a_jobset_made_by_a_trainjob_is_left_to_the_trainjob() -> None:
    parent = trainjob("tj")
    owner = jobset("tj", replicated_job("node", 1, 2, 1), owner=parent)
    member, child = jobset_pod(owner, "node")
    # the TrainJob's runtime is unknown, so nobody can size this pod: it must not
    # fall back to the JobSet's view, which would name a different gang
    assert recognize_pod(member, Lookup(owner, child), CONFIG) is None


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda s: s["spec"].update(replicatedJobs=[]), "spec.replicatedJobs"),
        (lambda s: s["spec"].update(replicatedJobs={}), "spec.replicatedJobs"),
        (
            lambda s: s["spec"]["replicatedJobs"][0].update(replicas=-2),
            "spec.replicatedJobs[0].replicas",
        ),
        (lambda s: s["spec"]["replicatedJobs"][0].pop("name"), "spec.replicatedJobs[0].name"),
        (
            lambda s: s["spec"]["replicatedJobs"][0].pop("template"),
            "spec.replicatedJobs[0].template",
        ),
        (
            lambda s: s["spec"]["replicatedJobs"][0]["template"]["spec"].update(parallelism="2"),
            "spec.replicatedJobs[0].template.spec.parallelism",
        ),
        (
            lambda s: s["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
                "containers"
            ][0]["resources"]["limits"].update({GPU: "500m"}),
            "spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources"
            '.limits["nvidia.com/gpu"]',
        ),
        (
            lambda s: s["spec"]["replicatedJobs"][0].update(dependsOn=[{"status": "Complete"}]),
            "spec.replicatedJobs[0].dependsOn[0].name",
        ),
    ],
)
def test_a_malformed_jobset_is_an_error_naming_the_field(mutate: Any, path: str) -> None:
    obj = jobset("js", replicated_job("workers", 2, 2, 1))
    mutate(obj)
    with pytest.raises(InvalidObject) as error:
        recognize_object(obj, no_lookup, CONFIG)
    assert error.value.path == path
