"""Config: defaults, every key read, and errors that name the key for every bad value."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gangkeeper.policies.errors import InvalidConfig
from gangkeeper.policies.model import Taint
from gangkeeper.policies.settings.config import Config, NodePool, load_config

FULL = """
backend: coscheduling
namespaceBackends:
  research: volcano
  infra: native
gpuResources: [nvidia.com/gpu, "nvidia.com/mig-*"]
schedulerNames:
  coscheduling: gang-scheduler
onConflict: reject
onUnreadable: reject
gangTimeoutSeconds: 600
nodeIdentityLabels: [kubernetes.io/hostname, example.com/instance-id]
placement: scheduler
namespacePlacement: {training: pinned}
preemption: off
namespacePreemption: {prod: lowerPriority}
rebindSeconds: 90
rebindRetries: 1
rebindScope: gang
podsReadyTimeoutSeconds: 900
podsReadyRequeue: true
pools:
- name: h100-spot
  maxCount: 16
  labels: {pool: h100-spot}
  taints:
  - {key: spot, value: "true", effect: NoSchedule}
  allocatable: {nvidia.com/gpu: 8, cpu: "96"}
"""


@pytest.mark.parametrize("empty", [None, {}])
def test_no_config_gives_the_defaults(empty: dict[str, Any] | None) -> None:
    config = load_config(empty)
    assert config == Config()
    assert config.backend == "gate"
    assert config.on_conflict == "skip"
    assert config.on_unreadable == "allow"
    assert config.placement == "pinned"
    assert config.preemption_for("any") == "lowerPriority"
    assert (config.rebind_scope, config.pods_ready_requeue) == ("auto", False)
    assert config.is_gpu_resource("nvidia.com/gpu")
    assert config.is_gpu_resource("nvidia.com/mig-1g.10gb")
    assert config.is_gpu_resource("gpu.intel.com/xe")
    assert not config.is_gpu_resource("cpu")


def test_every_key_of_a_full_config_is_read() -> None:
    config = load_config(yaml.safe_load(FULL))
    assert config.backend == "coscheduling"
    assert config.backend_for("research") == "volcano"
    assert config.backend_for("infra") == "native"
    assert config.backend_for("elsewhere") == "coscheduling"
    assert config.scheduler_name_for("coscheduling") == "gang-scheduler"
    assert config.scheduler_name_for("volcano") == "volcano"
    assert not config.is_gpu_resource("amd.com/gpu")
    assert config.on_conflict == "reject"
    assert config.on_unreadable == "reject"
    assert config.gang_timeout_seconds == 600
    assert config.placement == "scheduler"
    assert config.placement_for("training") == "pinned"
    assert config.placement_for("elsewhere") == "scheduler"
    # An unquoted YAML `off` is read as false: it still means off.
    assert (config.preemption_for("prod"), config.preemption_for("lab")) == (
        "lowerPriority", "off")
    assert (config.rebind_seconds, config.rebind_retries) == (90, 1)
    assert config.pods_ready_timeout_seconds == 900
    assert (config.rebind_scope, config.pods_ready_requeue) == ("gang", True)
    assert config.node_identity_labels == ("kubernetes.io/hostname", "example.com/instance-id")
    assert config.pools == (
        NodePool(
            name="h100-spot",
            max_count=16,
            labels={"pool": "h100-spot"},
            taints=(Taint("spot", "true", "NoSchedule"),),
            allocatable={"nvidia.com/gpu": 8, "cpu": 96},
        ),
    )


def test_null_sections_take_their_defaults() -> None:
    config = load_config(yaml.safe_load("pools:\nnamespaceBackends:\nbackend:\n"))
    assert config == Config()


def test_a_pools_devices_count_as_its_dra_allocatable() -> None:
    """`devices: {<DeviceClass>: <count per node>}`: the devices a node of the pool will
    publish, under the name the live path counts a class's devices by."""
    config = load_config({"pools": [{"name": "p", "maxCount": 2,
                                     "devices": {"gpu.example.com": "8"}}]})
    assert config.pools[0].name == "p"
    assert config.pools[0].devices == {"gpu.example.com": 8}
    # and the one whole node of the class each offers (allocationMode All)
    assert config.pools[0].allocatable == {"dra:gpu.example.com": 8,
                                           "dra:gpu.example.com/all": 1}


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ({"gpu.example.com": 0}, "pools[0].devices.gpu.example.com: must be a positive integer"),
        ({"gpu.example.com": "eight"},
         "pools[0].devices.gpu.example.com: must be a positive integer"),
        ({"gpu.example.com": 1.5}, "pools[0].devices.gpu.example.com: must be a positive integer"),
        ({"gpu.example.com": True}, "pools[0].devices.gpu.example.com: must be a positive integer"),
        ({"": 8}, "pools[0].devices: "),
        (["gpu.example.com"], "pools[0].devices: "),
    ],
    ids=["zero", "word", "fraction", "boolean", "no-class-name", "a-list"],
)
def test_a_bad_pool_devices_value_is_an_error_naming_the_field(
    devices: object, message: str
) -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_config({"pools": [{"name": "p", "maxCount": 1, "devices": devices}]})
    assert message in str(caught.value), str(caught.value)


def test_pool_allocatable_accepts_quantity_strings() -> None:
    config = load_config(
        {"pools": [{"name": "p", "maxCount": 1, "allocatable": {"x.com/gpu": "4"}}]}
    )
    assert config.pools[0].allocatable == {"x.com/gpu": 4}


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"backnd": "gate"}, "backnd"),
        ({"backend": "kube-batch"}, "backend"),
        ({"namespaceBackends": {"team": "yunikorn"}}, "namespaceBackends.team"),
        ({"namespaceBackends": ["team"]}, "namespaceBackends"),
        ({"gpuResources": "nvidia.com/gpu"}, "gpuResources"),
        ({"gpuResources": []}, "gpuResources"),
        ({"gpuResources": ["gpu"]}, "gpuResources[0]"),
        ({"gpuResources": ["nvidia.com/gpu", 3]}, "gpuResources[1]"),
        ({"schedulerNames": {"slurm": "x"}}, "schedulerNames.slurm"),
        ({"schedulerNames": {"volcano": ""}}, "schedulerNames.volcano"),
        ({"onConflict": "ignore"}, "onConflict"),
        ({"onUnreadable": True}, "onUnreadable"),
        ({"gangTimeoutSeconds": 0}, "gangTimeoutSeconds"),
        ({"gangTimeoutSeconds": "300"}, "gangTimeoutSeconds"),
        ({"gangTimeoutSeconds": True}, "gangTimeoutSeconds"),
        ({"pools": {"name": "p"}}, "pools"),
        ({"pools": [{"maxCount": 1}]}, "pools[0].name"),
        ({"pools": [{"name": "p"}]}, "pools[0].maxCount"),
        ({"pools": [{"name": "p", "maxCount": -1}]}, "pools[0].maxCount"),
        ({"pools": [{"name": "p", "maxCount": 1, "size": 3}]}, "pools[0].size"),
        (
            {"pools": [{"name": "p", "maxCount": 1, "allocatable": {"nvidia.com/gpu": "1.5"}}]},
            "pools[0].allocatable.nvidia.com/gpu",
        ),
        (
            {"pools": [{"name": "p", "maxCount": 1, "allocatable": {"nvidia.com/gpu": True}}]},
            "pools[0].allocatable.nvidia.com/gpu",
        ),
        ({"pools": [{"name": "p", "maxCount": 1, "labels": {"a": 1}}]}, "pools[0].labels.a"),
        (
            {"pools": [{"name": "p", "maxCount": 1, "taints": [{"key": "k", "effect": "Maybe"}]}]},
            "pools[0].taints[0].effect",
        ),
        (
            {"pools": [{"name": "p", "maxCount": 1}, {"name": "p", "maxCount": 2}]},
            "pools[1].name",
        ),
        ({"nodeIdentityLabels": "kubernetes.io/hostname"}, "nodeIdentityLabels"),
        ({"nodeIdentityLabels": [""]}, "nodeIdentityLabels[0]"),
        ({"placement": "spread"}, "placement"),
        ({"rebindSeconds": 0}, "rebindSeconds"),
        ({"rebindRetries": -1}, "rebindRetries"),
        ({"podsReadyTimeoutSeconds": "600"}, "podsReadyTimeoutSeconds"),
        ({"rebindScope": "pods"}, "rebindScope"),
        ({"podsReadyRequeue": "yes"}, "podsReadyRequeue"),
        ({"namespacePlacement": {"team": "anywhere"}}, "namespacePlacement.team"),
        ({"namespacePlacement": ["team"]}, "namespacePlacement"),
        ({"preemption": "always"}, "preemption"),
        ({"namespacePreemption": {"team": "never"}}, "namespacePreemption.team"),
        ([1, 2], "<root>"),
        ({"autoscaling": "karpenter"}, "autoscaling"),
        ({"namespaceAutoscaling": {"lab": "on"}}, "namespaceAutoscaling.lab"),
        ({"clusterAutoscales": "yes"}, "clusterAutoscales"),
        ({"provisioningTimeoutSeconds": 0}, "provisioningTimeoutSeconds"),
        ({"provisioningRetrySeconds": True}, "provisioningRetrySeconds"),
        ({"placeholders": {"image": ""}}, "placeholders.image"),
        ({"placeholders": {"priority": 1}}, "placeholders.priority"),
    ],
)
def test_bad_values_raise_invalid_config_naming_the_key(raw: Any, key: str) -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_config(raw)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"config {key}: ")


def test_an_unknown_key_error_lists_the_known_keys() -> None:
    known = "known: autoscaling, backend, clusterAutoscales, gangTimeoutSeconds"
    with pytest.raises(InvalidConfig, match=known):
        load_config({"gpus": []})


def test_pool_non_gpu_resources_take_any_quantity() -> None:
    pool = {"name": "p", "maxCount": 1, "allocatable": {"memory": "512Gi", "cpu": "95500m"}}
    config = load_config({"pools": [pool]})
    assert config.pools[0].allocatable == {"memory": 512 * 2**30, "cpu": 95}
