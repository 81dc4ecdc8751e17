"""The config loaders (settings/config.py, settings/autoscaling.py) share one set of checks:
the same bad value gets the same message wherever it sits."""

from __future__ import annotations

from typing import Any

import pytest

from gangkeeper.policies.errors import InvalidConfig
from gangkeeper.policies.settings.config import load_config


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(InvalidConfig) as caught:
        load_config(data)
    return str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # settings/config.py's keys
        ({"backend": "slurm"}, "config backend: must be one of gate, coscheduling, volcano, "
                               "native, got 'slurm'"),
        ({"gangTimeoutSeconds": 0}, "config gangTimeoutSeconds: must be a whole number ≥ 1, got 0"),
        ({"podsReadyRequeue": "yes"}, "config podsReadyRequeue: must be true or false, got 'yes'"),
        ({"pools": {}}, "config pools: must be a list, got dict"),
        ({"schedulerNames": []}, "config schedulerNames: must be a mapping, got list"),
        ({"pools": [{"name": "a", "maxCount": 1, "size": 2}]}, "config pools[0].size: unknown key"),
        # settings/autoscaling.py's keys
        ({"provisioningTimeoutSeconds": True},
         "config provisioningTimeoutSeconds: must be a whole number of seconds ≥ 1, got True"),
        ({"provisioningRequest": {"retryLimit": -1}},
         "config provisioningRequest.retryLimit: must be a whole number ≥ 0, got -1"),
        ({"clusterAutoscales": "yes"},
         "config clusterAutoscales: must be true or false, got 'yes'"),
        ({"placeholders": []}, "config placeholders: must be a mapping, got []"),
        ({"placeholders": {"img": "x"}},
         "config placeholders.img: unknown key (known: image, priorityClassName)"),
        ({"autoscaling": "on"}, "config autoscaling: must be one of placeholders, "
                                "provisioningrequest, off, got 'on'"),
    ],
)
def test_a_bad_value_is_refused_with_the_message_it_always_had(
    data: dict[str, Any], message: str
) -> None:
    assert refusal(data) == message


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"placeholders": {"image": "  "}}, "placeholders.image"),
        ({"schedulerNames": {"gate": "  "}}, "schedulerNames.gate"),
        ({"topology": [" "]}, "topology[0]"),
        ({"nodeIdentityLabels": ["\t"]}, "nodeIdentityLabels[0]"),
    ],
)
def test_a_blank_name_is_refused_in_either_loader(data: dict[str, Any], key: str) -> None:
    """A name of only spaces names nothing, in the autoscaling keys as in the others."""
    assert refusal(data) == f"config {key}: must be a non-empty string, got {data_value(data)!r}"


def data_value(data: dict[str, Any]) -> object:
    (value,) = data.values()
    if isinstance(value, dict):
        (value,) = value.values()
    elif isinstance(value, list):
        (value,) = value
    return value
