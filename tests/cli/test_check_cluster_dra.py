"""`gangkeeper check --kubeconfig` on a cluster whose GPUs are published through
Dynamic Resource Allocation (resource.k8s.io/v1).

The cluster (`FakeApi`, as the user's client) has 4 Nodes listing no GPU in
`allocatable`, a ResourceSlice of 8 devices per node, a DeviceClass selecting them
and a ResourceClaimTemplate of 8 (`builders.devices`: plain dicts shaped as
`k8s.io/api/resource/v1/types.go`). `-f` holds the Job alone, as a user checks a
manifest against the templates already in the cluster: check counts the devices as
`status` and `explain` do (`kube.device_state`), and the Job's claims through the
cluster's templates (or those of `-f`, which still count).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders.devices import CLASS, DEVICE_CLASS, NAMESPACE, TEMPLATE, node, resource_slice
from builders.rbac_api import RbacApi

from gangkeeper.webhook.cli.main import build_parser
from gangkeeper.webhook.kube import client, rest
from gangkeeper.webhook.kube.api import ApiError, Call
from gangkeeper.webhook.kube.device_view import CLAIM_TEMPLATES, CLASSES, SLICES
from gangkeeper.webhook.kube.fake import FakeApi

ROOT = Path(__file__).resolve().parents[2]
NODES = [f"dra-node-{i}" for i in range(4)]
TIMES = "\u00d7"  # how the reasons write "5 x 8"


def dra_cluster(api: FakeApi | None = None) -> FakeApi:
    api = api or FakeApi()
    api.seed("/api/v1/nodes", *(node(n) for n in NODES))
    api.seed(SLICES.path, *(resource_slice(n, 8) for n in NODES))
    api.seed(CLASSES.path, DEVICE_CLASS)
    api.seed(CLAIM_TEMPLATES.path, TEMPLATE)
    return api


def job_file(tmp_path: Path, workers: int, *, with_template: bool = False) -> Path:
    """examples/dra's Job of `workers` x 8 devices, in the templates' namespace; with
    `with_template`, its ResourceClaimTemplate beside it (as examples/dra has it)."""
    docs = [d for d in yaml.safe_load_all((ROOT / "examples/dra/job-fits.yaml").read_text()) if d]
    (job,) = [copy.deepcopy(d) for d in docs if d["kind"] == "Job"]
    job["metadata"]["namespace"] = NAMESPACE
    job["spec"]["completions"] = job["spec"]["parallelism"] = workers
    out = [job]
    if with_template:
        template = copy.deepcopy(TEMPLATE)
        template["metadata"]["name"] = "from-file"
        job["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = (
            "from-file")
        out.insert(0, template)
    path = tmp_path / f"job-{workers}.yaml"
    path.write_text(yaml.safe_dump_all(out))
    return path


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], api: FakeApi,
        path: Path) -> tuple[int, list[dict[str, Any]], str]:
    """`gangkeeper check -f PATH --kubeconfig -o json` whose client is `api`: the exit
    code, the gangs' records and stderr."""
    monkeypatch.setattr(client, "api_client", lambda *_args: None)
    monkeypatch.setattr(rest, "Rest", lambda _client: api)
    args = build_parser().parse_args(["check", "-f", str(path), "--kubeconfig", "-o", "json"])
    code = int(args.run(args))
    out, err = capsys.readouterr()
    return code, [r for r in json.loads(out) if r["gang"] is not None], err


def test_five_workers_of_eight_devices_on_four_dra_nodes_of_eight_are_refused_with_numbers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    code, (record,), err = run(monkeypatch, capsys, dra_cluster(), job_file(tmp_path, 5))
    assert code == 1, err
    assert record["verdict"] == "reject"
    assert f"5 {TIMES} 8 devices of DeviceClass {CLASS} = 40" in record["reason"]
    assert "at most 32" in record["reason"]


def test_four_workers_of_eight_devices_fit_and_are_admitted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    code, (record,), err = run(monkeypatch, capsys, dra_cluster(), job_file(tmp_path, 4))
    assert code == 0, err
    assert record["verdict"] == "admit"
    assert record["demand"] == {f"dra:{CLASS}": 32}


def test_a_claim_template_in_f_still_counts_against_the_clusters_devices(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    """The Job names a template the cluster lacks and `-f` holds."""
    code, (record,), err = run(
        monkeypatch, capsys, dra_cluster(), job_file(tmp_path, 5, with_template=True))
    assert code == 1, err
    assert f"5 {TIMES} 8 devices of DeviceClass {CLASS} = 40" in record["reason"]


class NoDra(RbacApi):
    """A user who may list Nodes and Pods but nothing of resource.k8s.io (`status`
    403), or an API server that does not serve it (404)."""

    def __init__(self, status: int) -> None:
        super().__init__(hidden=(), list_namespaces=True)
        self.status = status

    def send(self, call: Call) -> dict[str, object]:
        if call.path.startswith("/apis/resource.k8s.io/"):
            raise ApiError(self.status, "Forbidden" if self.status == 403 else "Not Found",
                           f'{{"message": "{call.path}"}}')
        return FakeApi.send(self, call)


@pytest.mark.parametrize(("status", "said"), [
    (403, "DRA devices are not counted: cannot list resourceslices (forbidden)"),
    (404, "DRA devices are not counted: the cluster does not serve resource.k8s.io/v1"),
], ids=["forbidden", "not-served"])
def test_a_cluster_whose_dra_objects_cannot_be_listed_is_checked_as_before_and_says_so(
    status: int, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    api = dra_cluster(NoDra(status))
    code, (record,), err = run(monkeypatch, capsys, api, job_file(tmp_path, 5))
    # As before: no GPU counted on the Nodes, so the gang is not refused.
    assert code == 0, err
    assert record["verdict"] == "admit"
    assert f"gangkeeper check: note: {said}" in err, err


class NoClaims(RbacApi):
    """A user who may list the cluster-scoped slices and classes but no namespace's
    ResourceClaimTemplates or ResourceClaims across namespaces (a Role in one)."""

    def __init__(self) -> None:
        super().__init__(hidden=(), list_namespaces=True)

    def send(self, call: Call) -> dict[str, object]:
        if call.path in (CLAIM_TEMPLATES.path, "/apis/resource.k8s.io/v1/resourceclaims"):
            raise ApiError(403, "Forbidden", f'{{"message": "{call.path} is forbidden"}}')
        return FakeApi.send(self, call)


def test_a_user_who_may_not_list_the_claim_templates_still_gets_the_templates_of_f_counted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    api = dra_cluster(NoClaims())
    code, (record,), err = run(monkeypatch, capsys, api, job_file(tmp_path, 5, with_template=True))
    assert code == 1, err
    assert f"5 {TIMES} 8 devices of DeviceClass {CLASS} = 40" in record["reason"]
    assert "cannot list resourceclaimtemplates (forbidden)" in err, err
    # A template it may not see is not counted, said, and not an error (exit 2).
    code, (record,), err = run(monkeypatch, capsys, api, job_file(tmp_path, 5))
    assert code == 0, err
    assert record["verdict"] == "admit" and record["demand"] == {}
    assert "the devices pods ask through resourceclaimtemplates" in err, err
