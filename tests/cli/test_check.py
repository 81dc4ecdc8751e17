"""`gangkeeper check` as a user runs it: exit codes, JSON records, errors naming files.

Every manifest in examples/ goes through the real command; its file name says the
verdict the sample fleet must give (`*-fits.yaml` admitted, `*-too-big.yaml` rejected).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FLEET = EXAMPLES / "fleet.yaml"
RECORD_KEYS = {
    "kind",
    "namespace",
    "name",
    "gang",
    "minMember",
    "demand",
    "verdict",
    "reason",
    "warnings",
    "file",
    "document",
}


def gangkeeper(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def examples(suffix: str) -> list[Path]:
    return sorted(EXAMPLES.glob(f"*-{suffix}.yaml"))


def check_json(*files: Path, nodes: Path = FLEET) -> tuple[int, list[dict[str, object]]]:
    args = [a for f in files for a in ("-f", str(f))]
    proc = gangkeeper("check", *args, "--nodes", str(nodes), "-o", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_the_examples_cover_both_verdicts() -> None:
    assert len(examples("fits")) >= 3
    assert len(examples("too-big")) >= 3


@pytest.mark.parametrize("path", examples("fits"), ids=lambda p: p.name)
def test_a_fitting_example_is_admitted_with_exit_0(path: Path) -> None:
    code, records = check_json(path)
    assert code == 0
    gangs = [r for r in records if r["gang"] is not None]
    assert gangs, "a fitting example must contain at least one gang"
    assert all(r["verdict"] == "admit" for r in records)
    assert all(set(r) == RECORD_KEYS for r in records)


@pytest.mark.parametrize("path", examples("too-big"), ids=lambda p: p.name)
def test_an_impossible_example_is_rejected_with_exit_1_and_numbers(path: Path) -> None:
    code, records = check_json(path)
    assert code == 1
    rejected = [r for r in records if r["verdict"] == "reject"]
    assert rejected
    for record in rejected:
        reason = str(record["reason"])
        assert str(record["gang"]) in reason
        assert any(ch.isdigit() for ch in reason), reason
        demand = record["demand"]
        assert isinstance(demand, dict) and demand and all(v > 0 for v in demand.values())


def test_one_rejected_gang_among_admitted_ones_makes_the_exit_code_1() -> None:
    code, records = check_json(examples("fits")[0], examples("too-big")[0])
    assert code == 1
    assert {r["verdict"] for r in records} == {"admit", "reject"}


def test_an_object_that_is_not_a_gang_gets_an_admit_record_with_null_min_member(
    tmp_path: Path,
) -> None:
    cm = tmp_path / "cm.yaml"
    cm.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: ml}\n")
    code, records = check_json(cm)
    assert code == 0
    assert records == [
        {
            "kind": "ConfigMap",
            "namespace": "ml",
            "name": "settings",
            "gang": None,
            "minMember": None,
            "demand": {},
            "verdict": "admit",
            "reason": "not a gang",
            "warnings": [],
            "file": str(cm),
            "document": 1,
        }
    ]


def test_text_output_names_the_verdict_and_the_gang() -> None:
    path = examples("too-big")[0]
    proc = gangkeeper("check", "-f", str(path), "--nodes", str(FLEET))
    assert proc.returncode == 1
    assert "reject" in proc.stdout


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("a: [unclosed\n", "not valid YAML"),
        (
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 2\n"
            "  template:\n    spec:\n      containers:\n      - name: c\n        image: i\n"
            "        resources: {limits: {nvidia.com/gpu: '1.5'}}\n",
            "nvidia.com/gpu",
        ),
    ],
    ids=["broken-yaml", "fractional-gpu"],
)
def test_bad_input_exits_2_naming_the_file(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    proc = gangkeeper("check", "-f", str(path), "--nodes", str(FLEET))
    assert proc.returncode == 2
    assert str(path) in proc.stderr
    assert fragment in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_missing_nodes_file_exits_2() -> None:
    proc = gangkeeper("check", "-f", str(examples("fits")[0]), "--nodes", "/nonexistent/fleet.yaml")
    assert proc.returncode == 2
    assert "/nonexistent/fleet.yaml" in proc.stderr


def test_kubectl_get_nodes_output_works_as_the_fleet(tmp_path: Path) -> None:
    """`kubectl get nodes -o json` prints a NodeList; check must accept it as --nodes."""
    import yaml

    nodes = [d for d in yaml.safe_load_all(FLEET.read_text()) if d]
    items = nodes[0]["items"] if nodes[0].get("kind") == "List" else nodes
    node_list = tmp_path / "nodes.json"
    node_list.write_text(json.dumps({"apiVersion": "v1", "kind": "NodeList", "items": items}))
    code, _ = check_json(examples("too-big")[0], nodes=node_list)
    assert code == 1


# --- check as a CI gate that cannot pass by accident ----------------------------------

TWO_8_GPU_NODES = "\n---\n".join(
    f"apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\n"
    "status: {allocatable: {nvidia.com/gpu: '8'}}\n"
    for i in range(2)
)


def run_check(*args: str, nodes: Path = FLEET) -> subprocess.CompletedProcess[str]:
    return gangkeeper("check", *args, "--nodes", str(nodes))


def annotated_pods(count: int, gpus: int) -> str:
    return "---\n".join(
        f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  annotations:\n"
        f"    gangkeeper.io/gang-name: three-gpu\n    gangkeeper.io/min-member: '5'\n"
        f"spec:\n  containers:\n  - name: c\n    image: i\n"
        f"    resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}\n"
        for i in range(count)
    )


@pytest.mark.parametrize("content", ["", "---\n", "# only a comment\n---\n---\n"])
def test_a_file_with_no_objects_exits_2_saying_so(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text(content)
    proc = run_check("-f", str(path))
    assert proc.returncode == 2
    assert f"no Kubernetes objects in {path}; nothing to check" in proc.stderr


def test_a_file_with_only_nodes_has_nothing_to_check() -> None:
    proc = run_check("-f", str(FLEET))
    assert proc.returncode == 2
    assert "only Node objects" in proc.stderr


def test_an_empty_directory_exits_2_saying_so(tmp_path: Path) -> None:
    proc = run_check("-f", str(tmp_path))
    assert proc.returncode == 2
    assert "holds no .yaml, .yml or .json files" in proc.stderr


@pytest.mark.parametrize(
    "template",
    [
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-train\n",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\n"
        "spec:\n  parallelism: {{ .Values.workers }}\n",
        'apiVersion: v1\nkind: Pod\nmetadata:\n  name: "{{ include \\"x.fullname\\" . }}"\n',
    ],
    ids=["unparsable", "parses-to-junk", "quoted-parses"],
)
def test_an_unrendered_helm_template_is_named_with_how_to_render_it(
    tmp_path: Path, template: str
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(template)
    proc = run_check("-f", str(path))
    assert proc.returncode == 2
    assert "unrendered Helm template" in proc.stderr
    assert "helm template" in proc.stderr
    assert "not valid YAML" not in proc.stderr and "not a gang" not in proc.stdout


def test_an_argo_style_placeholder_is_not_taken_for_helm(tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
                    "data: {cmd: 'echo {{inputs.parameters.x}}'}\n")
    assert run_check("-f", str(path)).returncode == 0


def test_a_helm_chart_directory_is_named_with_how_to_render_it(tmp_path: Path) -> None:
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: train\nversion: 0.1.0\n")
    proc = run_check("-f", str(tmp_path))
    assert proc.returncode == 2
    assert f"helm template RELEASE {tmp_path}" in proc.stderr


@pytest.mark.parametrize("as_dir", [True, False], ids=["directory", "file"])
def test_a_kustomization_is_named_with_how_to_render_it(tmp_path: Path, as_dir: bool) -> None:
    kustomization = tmp_path / "kustomization.yaml"
    kustomization.write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [job.yaml]\n"
    )
    proc = run_check("-f", str(tmp_path if as_dir else kustomization))
    assert proc.returncode == 2
    assert f"kubectl kustomize {tmp_path}" in proc.stderr


def test_a_kustomization_object_under_another_name_is_named_too(tmp_path: Path) -> None:
    path = tmp_path / "k.yaml"
    path.write_text("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
    proc = run_check("-f", str(path))
    assert proc.returncode == 2
    assert "a Kustomization, not rendered manifests" in proc.stderr


def test_one_bad_file_in_a_directory_still_reports_every_good_file(tmp_path: Path) -> None:
    for good in ("job-fits.yaml", "jobset-too-big.yaml"):
        (tmp_path / good).write_text((EXAMPLES / good).read_text())
    (tmp_path / "broken.yaml").write_text("a: [unclosed\n")
    (tmp_path / "zz-gpu.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  parallelism: 2\n"
        "  template:\n    spec:\n      containers:\n      - name: c\n        image: i\n"
        "        resources: {limits: {nvidia.com/gpu: '1.5'}}\n"
    )
    proc = run_check("-f", str(tmp_path), "-o", "json")
    assert proc.returncode == 2
    records = json.loads(proc.stdout)
    assert {(r["name"], r["verdict"]) for r in records} == {
        ("resnet-ddp", "admit"),
        ("gpt-pretrain", "reject"),
    }
    assert "broken.yaml" in proc.stderr and "zz-gpu.yaml" in proc.stderr


def test_two_different_training_runtimes_of_one_name_are_an_error_naming_both(
    tmp_path: Path,
) -> None:
    first = tmp_path / "a.yaml"
    second = tmp_path / "b.yaml"
    first.write_text((EXAMPLES / "trainjob-fits.yaml").read_text())
    second.write_text(
        (EXAMPLES / "trainjob-fits.yaml").read_text().replace("llama-finetune", "other")
        .replace("image: pytorch/pytorch", "image: my/pytorch", 1)
    )
    proc = run_check("-f", str(first), "-f", str(second))
    assert proc.returncode == 2
    assert "ClusterTrainingRuntime torch-distributed is given twice" in proc.stderr
    assert str(first) in proc.stderr and str(second) in proc.stderr


def test_identical_copies_of_a_runtime_are_one_object() -> None:
    """Each TrainJob example carries the same upstream runtime so it checks alone."""
    code, _ = check_json(EXAMPLES / "trainjob-fits.yaml", EXAMPLES / "trainjob-too-big.yaml")
    assert code == 1  # the verdicts, not a duplicate error


def test_cluster_scoped_objects_have_no_namespace_and_generate_name_is_a_prefix(
    tmp_path: Path,
) -> None:
    path = tmp_path / "objs.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n---\n"
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: jobsets.jobset.x-k8s.io}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: settings-}\n"
    )
    code, records = check_json(path)
    assert code == 0
    assert [(r["kind"], r["namespace"], r["name"]) for r in records] == [
        ("Namespace", None, "ml"),
        ("CustomResourceDefinition", None, "jobsets.jobset.x-k8s.io"),
        ("ConfigMap", "default", "settings-*"),
    ]
    text = run_check("-f", str(path)).stdout
    assert "admit   Namespace ml: not a gang" in text
    assert "ConfigMap default/settings-*: not a gang" in text
    assert "Job default/" not in text
    trainjob = run_check("-f", str(EXAMPLES / "trainjob-fits.yaml")).stdout
    assert "ClusterTrainingRuntime torch-distributed: not a gang" in trainjob


def test_demand_is_the_total_of_the_min_member_members(tmp_path: Path) -> None:
    """A PyTorchJob of 1 Master + 7 Workers with minAvailable 4: the verdict is about
    4 members, and so is the record's demand."""
    path = tmp_path / "pt.yaml"
    path.write_text(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: pt}\nspec:\n"
        "  runPolicy: {schedulingPolicy: {minAvailable: 4}}\n  pytorchReplicaSpecs:\n"
        + "".join(
            f"    {role}:\n      replicas: {n}\n      template:\n        spec:\n"
            "          containers:\n          - name: pytorch\n            image: i\n"
            "            resources: {limits: {nvidia.com/gpu: 2}}\n"
            for role, n in (("Master", 1), ("Worker", 7))
        )
    )
    _, [record] = check_json(path)
    assert record["minMember"] == 4
    assert record["demand"] == {"nvidia.com/gpu": 8}


def test_an_unknown_api_version_exits_2_naming_it_and_the_supported_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "js.yaml"
    path.write_text(
        (EXAMPLES / "jobset-fits.yaml").read_text().replace(
            "jobset.x-k8s.io/v1alpha2", "jobset.x-k8s.io/v1beta7"
        )
    )
    proc = run_check("-f", str(path))
    assert proc.returncode == 2
    assert "jobset.x-k8s.io/v1beta7 is not a version gangkeeper reads" in proc.stderr
    assert "supported: jobset.x-k8s.io/v1alpha2" in proc.stderr


def test_a_kueue_pod_group_given_whole_is_summed_and_reported_once() -> None:
    code, records = check_json(EXAMPLES / "kueue-podgroup-too-big.yaml")
    assert code == 1
    [record] = records
    assert (record["gang"], record["minMember"], record["demand"]) == (
        "llm-sweep", 5, {"nvidia.com/gpu": 40}
    )


def test_five_annotated_3_gpu_pods_on_two_8_gpu_nodes_are_rejected(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(TWO_8_GPU_NODES)
    pods = tmp_path / "pods.yaml"
    pods.write_text(annotated_pods(5, 3))
    proc = run_check("-f", str(pods), nodes=nodes)
    assert proc.returncode == 1
    assert "fit only 4" in proc.stdout
    assert "all 5 members seen: 15 nvidia.com/gpu" in proc.stdout


def test_one_annotated_pod_alone_is_admitted_and_the_warning_printed(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(TWO_8_GPU_NODES)
    pods = tmp_path / "pods.yaml"
    pods.write_text(annotated_pods(1, 3))
    proc = run_check("-f", str(pods), nodes=nodes)
    assert proc.returncode == 0
    assert (
        "warning: gang default/three-gpu: 5 members like the 1 seen (3 nvidia.com/gpu "
        "each) cannot be packed, at most 4 fit"
    ) in proc.stdout
    _, [record] = check_json(pods, nodes=nodes)
    assert record["warnings"] == [
        "gang default/three-gpu: 5 members like the 1 seen (3 nvidia.com/gpu each) "
        "cannot be packed, at most 4 fit"
    ]
