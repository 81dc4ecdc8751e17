"""`gangkeeper check` with Dynamic Resource Allocation (resource.k8s.io/v1) input.

`--nodes` holds Nodes, ResourceSlices and DeviceClasses (examples/dra/fleet.yaml: 4
nodes x 8 devices of the class gpu.example.com, which also serves nvidia.com/gpu);
`-f` holds ResourceClaimTemplates beside the workloads. Objects are shaped as
`k8s.io/api/resource/v1/types.go` defines them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DRA = ROOT / "examples" / "dra"
FLEET = DRA / "fleet.yaml"
TIMES = "\u00d7"  # how the reasons write "5 x 8"


def check(*files: Path, nodes: Path = FLEET) -> subprocess.CompletedProcess[str]:
    args = [a for f in files for a in ("-f", str(f))]
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "check", *args, "--nodes", str(nodes),
         "-o", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def verdicts(proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert proc.returncode in (0, 1), proc.stderr
    return [r for r in json.loads(proc.stdout) if r["gang"] is not None]


def test_a_dra_job_that_fits_the_devices_is_admitted() -> None:
    proc = check(DRA / "job-fits.yaml")
    (record,) = verdicts(proc)
    assert proc.returncode == 0
    assert record["demand"] == {"dra:gpu.example.com": 32}  # the gang's 4 x 8


def test_five_workers_of_eight_devices_on_four_nodes_of_eight_are_refused_with_numbers() -> None:
    proc = check(DRA / "job-too-big.yaml")
    (record,) = verdicts(proc)
    assert proc.returncode == 1 and record["verdict"] == "reject"
    assert f"5 {TIMES} 8 devices of DeviceClass gpu.example.com = 40" in record["reason"]
    assert "at most 32" in record["reason"]


def test_the_text_output_names_devices_by_their_class_never_the_internal_resource() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "check", "-f",
         str(DRA / "job-too-big.yaml"), "--nodes", str(FLEET)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "(40 devices of DeviceClass gpu.example.com)" in proc.stdout, proc.stdout
    assert "dra:" not in proc.stdout


def test_the_classes_extended_resource_name_makes_its_devices_count_as_that_resource() -> None:
    """The fleet's Nodes list no nvidia.com/gpu; the class serves it from its devices."""
    fits = verdicts(check(ROOT / "examples" / "job-fits.yaml"))
    assert [r["verdict"] for r in fits] == ["admit"]
    (too_big,) = verdicts(check(ROOT / "examples" / "job-too-big.yaml"))
    assert too_big["verdict"] == "reject"
    assert f"5 {TIMES} 8 nvidia.com/gpu = 40" in too_big["reason"]
    assert "at most 32" in too_big["reason"]


def test_a_resource_claim_in_f_named_by_every_worker_is_counted_once(tmp_path: Path) -> None:
    """Four workers of 8 devices each also share the ResourceClaim `rack` (4 devices):
    4 x 8 + 4 = 36 on 32, refused; charged to each worker it would say 48."""
    docs = [d for d in yaml.safe_load_all((DRA / "job-fits.yaml").read_text()) if d]
    (job,) = [d for d in docs if d["kind"] == "Job"]
    spec = job["spec"]["template"]["spec"]
    spec["resourceClaims"].append({"name": "rack", "resourceClaimName": "rack"})
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "rack", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                 "deviceClassName": "gpu.example.com", "count": 4}}]}}}  # fmt: skip
    given = tmp_path / "job.yaml"
    given.write_text(yaml.safe_dump_all([*docs, claim]))
    (record,) = verdicts(check(given))
    assert record["verdict"] == "reject" and record["demand"] == {"dra:gpu.example.com": 36}
    assert "36" in record["reason"] and "at most 32" in record["reason"]


def fleet(edit: Any, tmp_path: Path) -> Path:
    data = yaml.safe_load(FLEET.read_text())
    edit(data["items"])
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_tainted_device_makes_its_node_unknown_so_nothing_is_refused(tmp_path: Path) -> None:
    def taint(items: list[dict[str, Any]]) -> None:
        for item in items:
            if item["kind"] == "ResourceSlice":
                item["spec"]["devices"][0]["taints"] = [
                    {"key": "example.com/ecc", "effect": "NoSchedule"}
                ]

    proc = check(DRA / "job-too-big.yaml", nodes=fleet(taint, tmp_path))
    assert proc.returncode == 0
    assert [r["verdict"] for r in verdicts(proc)] == ["admit"]


def test_an_incomplete_pool_offers_no_devices(tmp_path: Path) -> None:
    def incomplete(items: list[dict[str, Any]]) -> None:
        for item in items:
            if item["kind"] == "ResourceSlice" and item["spec"]["nodeName"] == "dra-node-0":
                item["spec"]["pool"]["resourceSliceCount"] = 2

    (record,) = verdicts(check(DRA / "job-fits.yaml", nodes=fleet(incomplete, tmp_path)))
    assert record["verdict"] == "reject" and "at most 24" in record["reason"]


def test_a_malformed_resource_slice_is_bad_input_naming_file_and_field(tmp_path: Path) -> None:
    def broken(items: list[dict[str, Any]]) -> None:
        next(i for i in items if i["kind"] == "ResourceSlice")["spec"]["pool"].pop(
            "resourceSliceCount"
        )

    path = fleet(broken, tmp_path)
    proc = check(DRA / "job-fits.yaml", nodes=path)
    assert proc.returncode == 2
    assert str(path) in proc.stderr and "spec.pool.resourceSliceCount" in proc.stderr


def test_a_malformed_claim_template_is_bad_input_naming_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text((DRA / "job-fits.yaml").read_text().replace("count: 8", "count: 0"))
    proc = check(path)
    assert proc.returncode == 2
    assert str(path) in proc.stderr and "exactly.count" in proc.stderr


def test_a_pod_naming_a_claim_template_not_given_is_bad_input_naming_it(tmp_path: Path) -> None:
    # Without its template the Job's devices cannot be counted: it must not pass as a
    # gang asking no GPUs (as it did), just as a TrainJob without its runtime does not.
    path = tmp_path / "job.yaml"
    jobs = [d for d in yaml.safe_load_all((DRA / "job-fits.yaml").read_text())
            if d and d["kind"] == "Job"]
    path.write_text(yaml.safe_dump_all(jobs))
    proc = check(path)
    assert proc.returncode == 2, proc.stdout
    assert str(path) in proc.stderr, proc.stderr
    assert "resourceClaimTemplateName: ResourceClaimTemplate" in proc.stderr, proc.stderr
    assert "not found" in proc.stderr, proc.stderr


@pytest.mark.parametrize("kind", ["Secret"])
def test_other_kinds_in_the_nodes_file_are_still_refused(tmp_path: Path, kind: str) -> None:
    def other(items: list[dict[str, Any]]) -> None:
        items.append({"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}})

    proc = check(DRA / "job-fits.yaml", nodes=fleet(other, tmp_path))
    assert proc.returncode == 2 and f"got {kind}" in proc.stderr


def all_job(tmp_path: Path, workers: int) -> Path:
    """examples/dra/job-fits.yaml with `workers` workers whose template asks every device
    of the class on its node (allocationMode: All)."""
    docs = [d for d in yaml.safe_load_all((DRA / "job-fits.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"] == "ResourceClaimTemplate":
            exactly = doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]
            exactly["allocationMode"] = "All"
            del exactly["count"]
        else:
            doc["spec"]["completions"] = doc["spec"]["parallelism"] = workers
    path = tmp_path / f"all-{workers}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def four_and_eight(items: list[dict[str, Any]]) -> None:
    """Two nodes: dra-node-0 with 4 devices, dra-node-1 with 8 (the others dropped)."""
    keep = {"dra-node-0", "dra-node-1"}
    items[:] = [i for i in items if i["kind"] == "DeviceClass"
                or i["metadata"]["name"] in keep or i.get("spec", {}).get("nodeName") in keep]
    for item in items:
        if item["kind"] == "ResourceSlice" and item["spec"]["nodeName"] == "dra-node-0":
            item["spec"]["devices"] = item["spec"]["devices"][:4]


@pytest.mark.parametrize(("workers", "verdict"), [(2, "admit"), (3, "reject")])
def test_all_requests_take_a_whole_node_each(tmp_path: Path, workers: int, verdict: str) -> None:
    """On nodes of 4 and 8 devices, 2 workers asking All fit (one per node); 3 do not,
    though 3 x 4 (the fewest a node offers) = 12 devices are there."""
    (record,) = verdicts(check(all_job(tmp_path, workers), nodes=fleet(four_and_eight, tmp_path)))
    assert record["verdict"] == verdict, record
    if verdict == "reject":
        assert (f"3 {TIMES} 1 nodes giving every device of DeviceClass gpu.example.com "
                "(allocationMode All) = 3") in record["reason"], record["reason"]
        assert "at most 2" in record["reason"], record["reason"]


def two_a100_nodes(items: list[dict[str, Any]]) -> None:
    """dra-node-2 and dra-node-3 publish A100s (model a100); 0 and 1 keep their H100s."""
    for item in items:
        if item["kind"] == "ResourceSlice" and item["spec"]["nodeName"] in (
                "dra-node-2", "dra-node-3"):
            for device in item["spec"]["devices"]:
                device["attributes"]["model"] = {"string": "a100"}


def h100_job(tmp_path: Path, workers: int) -> Path:
    """examples/dra/job-fits.yaml with `workers` workers whose template's request
    selects H100s itself (`exactly.selectors`), not through its class."""
    docs = [d for d in yaml.safe_load_all((DRA / "job-fits.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"] == "ResourceClaimTemplate":
            exactly = doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]
            h100 = "device.attributes['gpu.example.com'].model == 'h100'"
            exactly["selectors"] = [{"cel": {"expression": h100}}]
        else:
            doc["spec"]["completions"] = doc["spec"]["parallelism"] = workers
    path = tmp_path / f"h100-{workers}.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


@pytest.mark.parametrize(("workers", "verdict"), [(2, "admit"), (3, "reject")])
def test_a_requests_own_selectors_narrow_the_devices_it_counts(
    tmp_path: Path, workers: int, verdict: str
) -> None:
    """2 nodes of 8 H100 and 2 of 8 A100; the request selects H100: 3 x 8 is refused
    (24 of 16), though the class has 32 devices; 2 x 8 fits."""
    proc = check(h100_job(tmp_path, workers), nodes=fleet(two_a100_nodes, tmp_path))
    (record,) = verdicts(proc)
    assert record["verdict"] == verdict, record
    if verdict == "reject":
        assert (f"3 {TIMES} 8 devices of DeviceClass gpu.example.com matching the request's "
                "selectors = 24") in record["reason"], record["reason"]
        assert "at most 16" in record["reason"], record["reason"]


def test_a_class_a_declared_pool_offers_is_charged_whole_not_narrowed(tmp_path: Path) -> None:
    """A pool's nodes publish devices whose attributes no one knows yet: with a pool of
    gpu.example.com devices, a request's selectors are not counted against the live
    nodes only (which would refuse 3 x 8 H100 though the pool may add H100 nodes)."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"pools": [{
        "name": "more", "maxCount": 2, "labels": {"pool": "more"},
        "devices": {"gpu.example.com": 8}}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "check", "-f",
         str(h100_job(tmp_path, 3)), "--nodes", str(fleet(two_a100_nodes, tmp_path)),
         "--config", str(config), "-o", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    (record,) = verdicts(proc)
    assert record["verdict"] == "admit", record
