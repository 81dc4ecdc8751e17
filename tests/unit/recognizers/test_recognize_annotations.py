"""gangkeeper's explicit annotations on pods and pod templates (recognizers/annotations.py)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import GPU, Lookup, gang_annotations, gpu_spec, no_lookup, pod, template

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
MIN_PATH = 'metadata.annotations["gangkeeper.io/min-member"]'


def test_a_bare_pod_with_annotations_is_one_seen_member_of_its_gang() -> None:
    member = pod("a", gpu_spec(4), annotations=gang_annotations("sweep", 3))
    membership = recognize_pod(member, no_lookup, CONFIG)
    assert membership is not None
    gang = membership.gang
    assert (gang.name, gang.min_member, gang.size) == ("sweep", 3, 3)
    assert gang.total_demand() == {GPU: 4}
    assert gang.source.kind == "Pod"
    assert gang.recognizer == "annotations"


def test_every_pod_of_the_gang_names_the_same_gang() -> None:
    names = {
        recognize_pod(pod(n, annotations=gang_annotations("g", 2)), no_lookup, CONFIG).gang.name  # type: ignore[union-attr]
        for n in ("a", "b")
    }
    assert names == {"g"}


def test_the_gang_source_is_the_top_level_owner_when_known() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {},
    }
    member = pod("a", annotations=gang_annotations("g", 2), owner=deployment)
    membership = recognize_pod(member, Lookup(deployment), CONFIG)
    assert membership is not None
    assert (membership.gang.source.kind, membership.gang.source.uid) == ("Deployment", "u1")


def test_a_workload_of_another_kind_with_an_annotated_template_is_a_gang() -> None:
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "ray", "namespace": "ml"},
        "spec": {
            "replicas": 4,
            "template": template(gpu_spec(2), annotations=gang_annotations("ray", 4)),
        },
    }
    [gang] = recognize_object(statefulset, no_lookup, CONFIG)
    assert (gang.namespace, gang.name, gang.min_member) == ("ml", "ray", 4)
    assert gang.total_demand() == {GPU: 8}


def test_a_workload_without_annotations_is_not_a_gang() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 5, "template": template(gpu_spec(1))},
    }
    assert recognize_object(deployment, no_lookup, CONFIG) == []


@pytest.mark.parametrize(
    ("annotations", "path"),
    [
        ({"gangkeeper.io/gang-name": "g"}, MIN_PATH),
        ({"gangkeeper.io/min-member": "2"}, 'metadata.annotations["gangkeeper.io/gang-name"]'),
        (gang_annotations("g", "two"), MIN_PATH),
        (gang_annotations("g", "-1"), MIN_PATH),
        (gang_annotations("g", "0"), MIN_PATH),
        (gang_annotations("g", "1.5"), MIN_PATH),
        (gang_annotations("g", "²"), MIN_PATH),
        (gang_annotations("g", "٣"), MIN_PATH),
        (gang_annotations("g", str(10**9)), MIN_PATH),
        (gang_annotations(" ", 2), 'metadata.annotations["gangkeeper.io/gang-name"]'),
    ],
)
def test_bad_or_half_annotations_are_errors_naming_the_key(
    annotations: dict[str, str], path: str
) -> None:
    with pytest.raises(InvalidObject) as error:
        recognize_pod(pod("a", annotations=annotations), no_lookup, CONFIG)
    assert error.value.path == path


def test_a_non_string_annotation_is_an_error() -> None:
    member: dict[str, Any] = pod("a", annotations=gang_annotations("g", 2))
    member["metadata"]["annotations"]["gangkeeper.io/min-member"] = 2
    with pytest.raises(InvalidObject) as error:
        recognize_pod(member, no_lookup, CONFIG)
    assert error.value.path == MIN_PATH
