"""Effective per-pod GPU demand and hard placement constraints (policies/podspec.py)."""

from __future__ import annotations

from typing import Any

import pytest
from builders.workloads import GPU, container, pod_spec
from hypothesis import given
from hypothesis import strategies as st

from gangkeeper.policies.errors import InvalidObject
from gangkeeper.policies.model import NodeSelectorTerm, Requirement, Toleration
from gangkeeper.policies.podspec import placement_of, pod_demand
from gangkeeper.policies.settings.config import Config, load_config

CONFIG = Config()
MIG = "nvidia.com/mig-1g.5gb"


def sidecar(gpus: int) -> dict[str, Any]:
    return container("sidecar", gpus, restart_policy="Always")


def init(gpus: int) -> dict[str, Any]:
    return container("init", gpus)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (pod_spec(container(gpus=2)), {GPU: 2}),
        (pod_spec(container("a", 2), container("b", 3)), {GPU: 5}),
        # ordinary init containers run alone: the larger of init peak and app sum
        (pod_spec(container(gpus=2), init_containers=[init(4)]), {GPU: 4}),
        (pod_spec(container(gpus=4), init_containers=[init(2)]), {GPU: 4}),
        (pod_spec(container(gpus=1), init_containers=[init(3), init(2)]), {GPU: 3}),
        # a sidecar keeps running next to the app containers
        (pod_spec(container(gpus=2), init_containers=[sidecar(1)]), {GPU: 3}),
        # ...and next to every init container started after it
        (pod_spec(container(gpus=1), init_containers=[sidecar(2), init(3)]), {GPU: 5}),
        # an init container started before the sidecar runs without it
        (pod_spec(container(gpus=1), init_containers=[init(3), sidecar(2)]), {GPU: 3}),
        (pod_spec(container(gpus=0), init_containers=[sidecar(1), sidecar(1), init(1)]), {GPU: 3}),
        # overhead is added on top
        (pod_spec(container(gpus=2), overhead={GPU: "1"}), {GPU: 3}),
        # zero and absent GPUs are omitted
        (pod_spec(container(gpus=0)), {}),
        (pod_spec(container()), {}),
        # names are never summed across each other
        (pod_spec(container("a", 1), container("b", 2, resource=MIG)), {GPU: 1, MIG: 2}),
        # resources that are not GPUs are ignored, even when they are not quantities
        (
            {"containers": [{"name": "a", "resources": {"limits": {"cpu": "lots", GPU: 1}}}]},
            {GPU: 1},
        ),
    ],
)
def test_demand_is_computed_as_the_scheduler_does(
    spec: dict[str, Any], expected: dict[str, int]
) -> None:
    assert pod_demand(spec, CONFIG) == expected


def test_a_gpu_given_only_in_limits_counts_as_requested() -> None:
    only_limits = pod_spec(container(gpus=3))
    both = pod_spec(container(gpus=3, in_requests=True))
    assert pod_demand(only_limits, CONFIG) == pod_demand(both, CONFIG) == {GPU: 3}


def test_a_gpu_given_only_in_requests_counts() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {GPU: "2"}}}]}
    assert pod_demand(spec, CONFIG) == {GPU: 2}


def test_configured_gpu_names_decide_what_is_counted() -> None:
    config = load_config({"gpuResources": ["example.com/tpu"]})
    spec = pod_spec(container("a", 2, resource="example.com/tpu"), container("b", 4))
    assert pod_demand(spec, config) == {"example.com/tpu": 2}


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (pod_spec(container(gpus="1.5")), 'spec.containers[0].resources.limits["nvidia.com/gpu"]'),
        (pod_spec(container(gpus="500m")), 'spec.containers[0].resources.limits["nvidia.com/gpu"]'),
        (
            pod_spec(container(), container(gpus=-1)),
            'spec.containers[1].resources.limits["nvidia.com/gpu"]',
        ),
        (
            pod_spec(container(), init_containers=[container(gpus="x")]),
            'spec.initContainers[0].resources.limits["nvidia.com/gpu"]',
        ),
        (pod_spec(container(), overhead={GPU: "0.5"}), 'spec.overhead["nvidia.com/gpu"]'),
        ({"containers": "nope"}, "spec.containers"),
        ({}, "spec.containers"),
        ({"containers": [1]}, "spec.containers[0]"),
        ({"containers": [{"resources": []}]}, "spec.containers[0].resources"),
        ({"containers": [{"resources": {"limits": 3}}]}, "spec.containers[0].resources.limits"),
        (
            {"containers": [{}], "initContainers": [{"restartPolicy": 1}]},
            "spec.initContainers[0].restartPolicy",
        ),
        ("not a spec", "spec"),
        (None, "spec"),
    ],
)
def test_malformed_fields_are_errors_naming_the_path(spec: Any, path: str) -> None:
    with pytest.raises(InvalidObject) as error:
        pod_demand(spec, CONFIG)
    assert error.value.path == path


def test_the_path_prefix_is_the_callers() -> None:
    with pytest.raises(InvalidObject) as error:
        pod_demand(pod_spec(container(gpus="1.5")), CONFIG, "spec.template.spec")
    assert error.value.path.startswith("spec.template.spec.containers[0]")


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def test_placement_reads_selector_affinity_and_tolerations() -> None:
    spec = pod_spec(
        node_selector={"pool": "a100", "zone": "z1"},
        tolerations=[
            {"key": "pool", "operator": "Equal", "value": "l4", "effect": "NoSchedule"},
            {"operator": "Exists"},
        ],
        affinity=required(
            {
                "matchExpressions": [
                    {"key": "gpu", "operator": "In", "values": ["a100", "h100"]},
                    {"key": "mem", "operator": "Gt", "values": ["40"]},
                    {"key": "spot", "operator": "DoesNotExist"},
                ]
            },
            {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
        ),
    )
    placement = placement_of(spec)
    assert placement.node_selector == (("pool", "a100"), ("zone", "z1"))
    assert placement.required_terms == (
        NodeSelectorTerm(
            match_expressions=(
                Requirement("gpu", "In", ("a100", "h100")),
                Requirement("mem", "Gt", ("40",)),
                Requirement("spot", "DoesNotExist"),
            )
        ),
        NodeSelectorTerm(match_fields=(Requirement("metadata.name", "NotIn", ("n1",)),)),
    )
    assert placement.tolerations == (
        Toleration("pool", "Equal", "l4", "NoSchedule"),
        Toleration("", "Exists", "", ""),
    )


def test_soft_preferences_are_not_constraints() -> None:
    spec = pod_spec(
        affinity={
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": []}}
                ]
            },
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
        }
    )
    placement = placement_of(spec)
    assert placement.required_terms == ()
    assert placement.node_selector == ()


def test_node_name_pins_every_term_to_that_node() -> None:
    pin = Requirement("metadata.name", "In", ("gpu-7",))
    plain = placement_of({**pod_spec(), "nodeName": "gpu-7"})
    assert plain.required_terms == (NodeSelectorTerm(match_fields=(pin,)),)
    with_affinity = placement_of(
        {
            **pod_spec(
                affinity=required({"matchExpressions": [{"key": "a", "operator": "Exists"}]})
            ),
            "nodeName": "gpu-7",
        }
    )
    assert with_affinity.required_terms == (
        NodeSelectorTerm((Requirement("a", "Exists"),), (pin,)),
    )


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        (pod_spec(node_selector={"a": 1}), "spec.nodeSelector.a"),  # type: ignore[dict-item]
        ({**pod_spec(), "nodeSelector": []}, "spec.nodeSelector"),
        ({**pod_spec(), "tolerations": {}}, "spec.tolerations"),
        (pod_spec(tolerations=[{"operator": "Maybe"}]), "spec.tolerations[0].operator"),
        (pod_spec(tolerations=[{"effect": "Sometimes"}]), "spec.tolerations[0].effect"),
        (pod_spec(tolerations=["x"]), "spec.tolerations[0]"),
        (
            pod_spec(affinity=required()),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms",
        ),
        (
            pod_spec(affinity=required({"matchExpressions": [{"key": "a", "operator": "Near"}]})),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator",
        ),
        (
            pod_spec(affinity=required({"matchExpressions": [{"key": "a", "operator": "In"}]})),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].values",
        ),
        (
            pod_spec(
                affinity=required(
                    {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}
                )
            ),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].values",
        ),
        (
            pod_spec(
                affinity=required(
                    {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}
                )
            ),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].values",
        ),
        (
            pod_spec(
                affinity=required(
                    {"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["x"]}]}
                )
            ),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchFields[0].key",
        ),
        (
            pod_spec(
                affinity=required({"matchFields": [{"key": "metadata.name", "operator": "Exists"}]})
            ),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchFields[0].operator",
        ),
        (
            pod_spec(affinity={"nodeAffinity": "x"}),
            "spec.affinity.nodeAffinity",
        ),
        ({**pod_spec(), "nodeName": 5}, "spec.nodeName"),
    ],
)
def test_malformed_placement_is_an_error_naming_the_path(spec: Any, path: str) -> None:
    with pytest.raises(InvalidObject) as error:
        placement_of(spec)
    assert error.value.path == path


def _timeline_peak(app: list[int], inits: list[tuple[int, bool]], overhead: int) -> int:
    """The most GPUs the pod ever holds, by walking the kubelet's start order.

    Init containers start one at a time; a sidecar (True) keeps running once
    started, an ordinary one (False) exits before the next starts; then the app
    containers run next to every sidecar. An independent formulation of what
    pod_demand computes with the scheduler's max/sum formula.
    """
    running_sidecars = 0
    peak = 0
    for gpus, is_sidecar in inits:
        if is_sidecar:
            running_sidecars += gpus
            peak = max(peak, running_sidecars)
        else:
            peak = max(peak, running_sidecars + gpus)
    peak = max(peak, running_sidecars + sum(app))
    return peak + overhead


@given(
    app=st.lists(st.integers(0, 8), min_size=1, max_size=4),
    inits=st.lists(st.tuples(st.integers(0, 8), st.booleans()), max_size=5),
    overhead=st.integers(0, 2),
)
def test_demand_is_the_peak_of_the_container_timeline(
    app: list[int], inits: list[tuple[int, bool]], overhead: int
) -> None:
    spec = pod_spec(
        *(container(f"app-{i}", g) for i, g in enumerate(app)),
        init_containers=[
            container(f"init-{i}", g, restart_policy="Always" if side else None)
            for i, (g, side) in enumerate(inits)
        ],
        overhead={GPU: overhead},
    )
    peak = _timeline_peak(app, inits, overhead)
    assert pod_demand(spec, CONFIG) == ({GPU: peak} if peak else {})
