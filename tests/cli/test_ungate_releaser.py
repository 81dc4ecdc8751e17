"""`gangkeeper ungate` releases through the controller's own `Releaser`, on the
in-memory API: a gang that fits is released pinned with the controller's guarded
patch; a member changed only where no plan reads (the scheduler's SchedulingGated
condition) is retried once on its new version, as the controller does; one changed
where the plan reads is left gated and said so (exit 1). Its behaviour on a real
cluster is tested end to end (tests/e2e/test_ungate.py)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from builders.gangs import members, node

from gangkeeper.policies.assigner import Pin, pin_of
from gangkeeper.policies.names import GATE
from gangkeeper.policies.podspec import placement_of
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.cli import ungate
from gangkeeper.webhook.cli.cluster_state import ClusterState, read_cluster
from gangkeeper.webhook.kube.fake import FakeApi

PODS = "/api/v1/pods"
ARGS = argparse.Namespace(namespace=None, dry_run=False, force=False,
                          command_prog="gangkeeper ungate")


def listed(api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ungate` reads the cluster as it is now (the list happens here)."""
    read = read_cluster(api, Config(), None, "gangkeeper ungate")
    state = ClusterState(Config(), api, read.pods, read.nodes)  # type: ignore[arg-type]
    monkeypatch.setattr(ungate, "cluster_state_of", lambda _args: state)


def stored(api: FakeApi, name: str) -> dict[str, Any]:
    return api.objects[PODS][f"team/{name}"]


def gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


@pytest.fixture
def api() -> FakeApi:
    api = FakeApi()
    api.seed("/api/v1/nodes", node("n1", 8))
    api.seed(PODS, *members("train", 2, gpus=4))
    return api


def test_a_gang_that_fits_is_released_pinned_with_the_guarded_patch(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    listed(api, monkeypatch)
    assert ungate.run(ARGS) == 0
    for name in ("train-0", "train-1"):
        assert GATE not in gates(stored(api, name))
        assert pin_of(placement_of(stored(api, name)["spec"])) == Pin(node="n1")
    assert "released team/train: 2 of 2 gated members" in capsys.readouterr().out


def test_a_member_changed_only_where_no_plan_reads_is_retried_once_and_released(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed(api, monkeypatch)
    changed = stored(api, "train-1")
    changed["metadata"]["resourceVersion"] = "999"  # the scheduler's SchedulingGated
    changed["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    assert ungate.run(ARGS) == 0
    assert GATE not in gates(stored(api, "train-1"))
    patches = [path for method, path, _ in api.calls if method == "PATCH"]
    assert patches.count("/api/v1/namespaces/team/pods/train-1") == 2


def test_a_member_changed_where_the_plan_reads_is_left_gated_and_said(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    listed(api, monkeypatch)
    changed = stored(api, "train-1")
    changed["metadata"]["resourceVersion"] = "999"
    changed["spec"]["nodeSelector"] = {"pool": "elsewhere"}
    assert ungate.run(ARGS) == 1
    assert GATE in gates(stored(api, "train-1"))
    err = capsys.readouterr().err
    assert "team/train-1: left gated (conflict)" in err and "run it again" in err


def test_gpus_a_device_class_serves_stay_out_of_the_podgroups_min_resources(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the controller's PodGroup (test_controller_podgroups.py): where a DeviceClass
    serves `nvidia.com/gpu` by `extendedResourceName` (KEP-5004), Coscheduling's
    PreFilter would sum a resource DRA-only Nodes do not list, and wait for ever."""
    api.objects[PODS].clear()
    api.seed(PODS, *members("train", 2, gpus=4, backend="coscheduling"))
    api.seed("/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
                 "extendedResourceName": "nvidia.com/gpu"}})  # fmt: skip
    listed(api, monkeypatch)
    assert ungate.run(ARGS) == 0
    [group] = [obj for path, objs in api.objects.items() if path.endswith("/podgroups")
               for obj in objs.values()]
    assert group["spec"] == {"minMember": 2}
