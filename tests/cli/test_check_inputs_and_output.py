"""`gangkeeper check` in a pipeline: manifests on stdin, templates that are rendered
after all, a fleet file with no GPUs, and output that says where each record came from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FLEET = EXAMPLES / "fleet.yaml"
CPU_NODE = (
    "apiVersion: v1\nkind: Node\nmetadata: {name: cpu-0}\nstatus: {allocatable: {cpu: '8'}}\n"
)
CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"


def check(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "check", *args],
        capture_output=True, text=True, timeout=60, check=False, input=stdin,
    )


# --- -f - ------------------------------------------------------------------------------


def test_manifests_on_stdin_are_checked_like_a_file() -> None:
    """`helm template ... | gangkeeper check -f - --nodes fleet.yaml`."""
    proc = check("-f", "-", "--nodes", str(FLEET), "-o", "json",
                 stdin=(EXAMPLES / "job-too-big.yaml").read_text())
    assert proc.returncode == 1, proc.stderr
    [record] = [r for r in json.loads(proc.stdout) if r["gang"] is not None]
    assert record["verdict"] == "reject"
    assert record["file"] == "<stdin>"


def test_stdin_beside_a_file_is_read_once_and_both_are_reported() -> None:
    proc = check("-f", "-", "-f", str(EXAMPLES / "job-fits.yaml"), "--nodes", str(FLEET),
                 "-o", "json", stdin=CONFIG_MAP)
    assert proc.returncode == 0, proc.stderr
    files = {r["file"] for r in json.loads(proc.stdout)}
    assert files == {"<stdin>", str(EXAMPLES / "job-fits.yaml")}


def test_bad_yaml_on_stdin_is_named_as_stdin() -> None:
    proc = check("-f", "-", "--nodes", str(FLEET), stdin="a: [unclosed\n")
    assert proc.returncode == 2
    assert "<stdin> document 1: not valid YAML" in proc.stderr
    assert "Traceback" not in proc.stderr


# --- Go templates inside strings -----------------------------------------------------

PROMETHEUS_RULE = """\
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: gpu-alerts, namespace: monitoring}
spec:
  groups:
  - name: gpus
    rules:
    - alert: GpuIdle
      expr: avg(DCGM_FI_DEV_GPU_UTIL) by (namespace) < 5
      labels: {namespace: "{{ $labels.namespace }}"}
      annotations:
        summary: '{{ $labels.namespace }} has idle GPUs'
        description: |
          {{ if gt $value 0.0 }}GPUs of {{ $labels.namespace }} idle{{ end }}
"""


def test_a_rendered_prometheus_rule_with_go_templates_in_strings_is_not_a_helm_template(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rule.yaml"
    path.write_text(PROMETHEUS_RULE)
    proc = check("-f", str(path), "--nodes", str(FLEET))
    assert proc.returncode == 0, proc.stderr
    assert "PrometheusRule monitoring/gpu-alerts: not a gang" in proc.stdout


@pytest.mark.parametrize(
    "template",
    [
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
        "data:\n  owner: x-{{ .Release.Name }}\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n"
        "  {{ .Values.key }}: x\n",
    ],
    ids=["action-in-a-plain-scalar", "action-as-a-key"],
)
def test_an_action_outside_a_quoted_string_is_still_an_unrendered_template(
    tmp_path: Path, template: str
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(template)
    proc = check("-f", str(path), "--nodes", str(FLEET))
    assert proc.returncode == 2, proc.stdout
    assert f"{path} line " in proc.stderr and "unrendered Helm template" in proc.stderr


# --- a fleet without GPUs ----------------------------------------------------------


def test_a_nodes_file_with_no_gpu_node_and_no_pool_is_bad_input(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(CPU_NODE)
    proc = check("-f", str(EXAMPLES / "job-too-big.yaml"), "--nodes", str(nodes))
    assert proc.returncode == 2, proc.stdout
    assert f"no GPU nodes or pools in {nodes}: " in proc.stderr
    assert "--allow-no-gpus" in proc.stderr
    assert "admit" not in proc.stdout


def test_allow_no_gpus_checks_against_a_cpu_only_fleet(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(CPU_NODE)
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(CONFIG_MAP)
    proc = check("-f", str(manifest), "--nodes", str(nodes), "--allow-no-gpus")
    assert proc.returncode == 0, proc.stderr


# --- where each record came from, and a summary --------------------------------------


def test_each_json_record_names_its_file_and_document(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(CONFIG_MAP + "---\n" + (EXAMPLES / "job-too-big.yaml").read_text())
    proc = check("-f", str(path), "--nodes", str(FLEET), "-o", "json")
    records = json.loads(proc.stdout)
    assert [(r["kind"], r["file"], r["document"]) for r in records] == [
        ("ConfigMap", str(path), 1),
        ("Job", str(path), 2),
    ]


def test_each_text_record_names_its_file_and_document(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(CONFIG_MAP + "---\n" + (EXAMPLES / "job-too-big.yaml").read_text())
    proc = check("-f", str(path), "--nodes", str(FLEET))
    first_lines = [line for line in proc.stdout.splitlines() if not line.startswith(" ")]
    assert first_lines[0].endswith(f": not a gang [{path} document 1]"), proc.stdout
    assert first_lines[1].startswith("reject  Job default/llama-pretrain:"), proc.stdout
    assert first_lines[1].endswith(f" [{path} document 2]"), proc.stdout


def test_text_output_ends_with_a_summary_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [unclosed\n")
    proc = check("-f", str(EXAMPLES / "job-fits.yaml"), "-f", str(EXAMPLES / "job-too-big.yaml"),
                 "-f", str(bad), "--nodes", str(FLEET))
    assert proc.returncode == 2
    assert proc.stdout.splitlines()[-1] == "1 admitted, 1 rejected, 1 error"


def test_namespace_places_objects_that_name_none_as_kubectl_apply_does(tmp_path: Path) -> None:
    path = tmp_path / "objs.yaml"
    path.write_text(
        CONFIG_MAP + "---\n" + CONFIG_MAP.replace("{name: settings}", "{name: s, namespace: ml}")
        + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n"
    )
    proc = check("-f", str(path), "--nodes", str(FLEET), "-n", "team-a", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert [(r["name"], r["namespace"]) for r in json.loads(proc.stdout)] == [
        ("settings", "team-a"), ("s", "ml"), ("team-a", None)
    ]
