"""Kueue plain-pod groups (recognizers/kueue.py)."""

from __future__ import annotations

import pytest
from builders.workloads import GPU, gang_annotations, gpu_spec, no_lookup, pod

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.recognizers.registry import recognize_object, recognize_pod
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"


def kueue_pod(total: str = "3", **extra: str) -> dict[str, object]:
    return pod(
        "p-0",
        gpu_spec(2),
        labels={GROUP: "sweep"},
        annotations={TOTAL: total, **extra},
    )


def test_a_kueue_group_pod_is_a_member_of_a_gang_of_the_total_count() -> None:
    membership = recognize_pod(kueue_pod("3"), no_lookup, CONFIG)
    assert membership is not None
    gang = membership.gang
    assert (gang.name, gang.min_member, gang.size) == ("sweep", 3, 3)
    # only this pod's needs are known; the others are counted, not guessed
    assert gang.total_demand() == {GPU: 2}
    assert gang.recognizer == "kueue-podgroup"


def test_a_pod_object_in_recognize_object_gives_the_same_gang() -> None:
    member = kueue_pod("3")
    membership = recognize_pod(member, no_lookup, CONFIG)
    assert membership is not None
    assert recognize_object(member, no_lookup, CONFIG) == [membership.gang]


@pytest.mark.parametrize("total", ["1", "0"])
def test_a_group_of_one_is_not_a_gang(total: str) -> None:
    assert recognize_pod(kueue_pod(total), no_lookup, CONFIG) is None


def test_the_label_without_the_count_is_not_a_gang() -> None:
    assert recognize_pod(pod("p", labels={GROUP: "sweep"}), no_lookup, CONFIG) is None


@pytest.mark.parametrize("total", ["three", "-2", "1.5", ""])
def test_a_bad_total_count_is_an_error_naming_the_annotation(total: str) -> None:
    with pytest.raises(InvalidObject) as error:
        recognize_pod(kueue_pod(total), no_lookup, CONFIG)
    assert error.value.path == f'metadata.annotations["{TOTAL}"]'


def test_explicit_gangkeeper_annotations_win() -> None:
    membership = recognize_pod(kueue_pod("3", **gang_annotations("mine", 5)), no_lookup, CONFIG)
    assert membership is not None
    assert (membership.gang.name, membership.gang.min_member) == ("mine", 5)
