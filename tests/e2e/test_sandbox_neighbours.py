"""The sandbox's neighbours without a cluster: versions pinned once, components chosen
by name, webhook configurations pointed at loopback, kwok's Stages complete.

These run everywhere (no `cluster` fixture); the e2e tests beside them run the
components for real.
"""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import yaml

from gangkeeper.webhook.sandbox import (
    CERT_MANAGER_VERSION,
    HELM_VERSION,
    PROVISIONING_REQUEST_VERSION,
    neighbours,
)
from gangkeeper.webhook.sandbox.karpenter import KARPENTER_VERSION
from gangkeeper.webhook.sandbox.kuberay import KUBERAY_VERSION
from gangkeeper.webhook.sandbox.kueue import KUEUE_VERSION
from gangkeeper.webhook.sandbox.neighbours import (
    JOBSET_CONTROLLER,
    KWOK_VERSION,
    LWS_CONTROLLER,
    SCHEDULER_PLUGINS_VERSION,
    TRAINER_CONTROLLER,
    RunningController,
    coscheduling_config,
    parse_components,
    webhook_configurations,
)

WRAPPERS = Path(__file__).resolve().parents[2] / "deploy" / "sandbox"
NEIGHBOURS = ("kwok", "jobset", "lws", "trainer", "scheduler-plugins", "karpenter", "kueue",
              "kuberay")


def _pinned(wrapper: str, module: str) -> str:
    text = (WRAPPERS / wrapper / "go.mod").read_text()
    match = re.search(rf"^require {re.escape(module)} (\S+)$", text, re.M)
    assert match, f"deploy/sandbox/{wrapper}/go.mod does not require {module} on one line"
    return match.group(1)


@pytest.mark.parametrize(
    ("wrapper", "module", "version"),
    [
        ("kwok", "sigs.k8s.io/kwok", KWOK_VERSION),
        ("jobset", "sigs.k8s.io/jobset", JOBSET_CONTROLLER.version),
        ("lws", "sigs.k8s.io/lws", LWS_CONTROLLER.version),
        ("trainer", "github.com/kubeflow/trainer/v2", TRAINER_CONTROLLER.version),
        ("scheduler-plugins", "sigs.k8s.io/scheduler-plugins", SCHEDULER_PLUGINS_VERSION),
        ("karpenter", "sigs.k8s.io/karpenter", KARPENTER_VERSION),
        ("kueue", "sigs.k8s.io/kueue", KUEUE_VERSION),
        ("kuberay", "github.com/ray-project/kuberay/ray-operator", KUBERAY_VERSION),
        ("helm", "helm.sh/helm/v3", HELM_VERSION),
        ("cert-manager", "github.com/cert-manager/cert-manager", CERT_MANAGER_VERSION),
        ("provisioning-request", "k8s.io/autoscaler/cluster-autoscaler/apis",
         PROVISIONING_REQUEST_VERSION),
    ],
)
def test_the_sandbox_looks_for_the_version_its_wrapper_module_builds(
    wrapper: str, module: str, version: str
) -> None:
    assert _pinned(wrapper, module) == version


def test_each_neighbour_has_its_own_wrapper_module() -> None:
    wrappers = (*NEIGHBOURS, "helm", "cert-manager", "provisioning-request")
    modules = {w: (WRAPPERS / w / "go.mod").read_text().splitlines()[0] for w in wrappers}
    assert modules == {w: f"module gangkeeper.io/sandbox/{w}" for w in modules}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kwok,jobset,lws", ("kwok", "jobset", "lws")),
        ("lws, kwok", ("kwok", "lws")),
        ("", ()),
        ("none", ()),
        ("karpenter,kwok", ("kwok", "karpenter")),
        ("kueue,kwok", ("kwok", "kueue")),
        ("kuberay,kwok", ("kwok", "kuberay")),
    ],
)
def test_components_are_taken_by_name_in_start_order(text: str, expected: tuple[str, ...]) -> None:
    assert parse_components(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kwok,kueu", "unknown component(s) kueu"),
        ("jobset", "need kwok"),
        ("kwok,trainer", "trainer needs jobset"),
        ("karpenter", "karpenter needs kwok"),
        ("kuberay", "kuberay needs kwok"),
    ],
)
def test_a_bad_component_list_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_components(text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--components", "kwok,bogus"], "--components: unknown component(s) bogus"),
        (["--nodes", "-1"], "--nodes: takes a count >= 0"),
    ],
)
def test_sandbox_up_refuses_bad_options_with_exit_2_naming_the_option(
    args: list[str], message: str, tmp_path: Path
) -> None:
    command = [sys.executable, "-m", "gangkeeper.webhook.cli", "sandbox", "up"]
    done = subprocess.run(
        [*command, "--dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


def test_scheduler_plugins_is_built_with_its_own_replace_block_and_externaljwt() -> None:
    text = (WRAPPERS / "scheduler-plugins" / "go.mod").read_text()
    # The module's staging pins (v0.34.1) rather than whatever its requirements resolve
    # to; k8s.io/externaljwt is the one it needs but its block does not list.
    assert "k8s.io/kubernetes => k8s.io/kubernetes v1.34.1" in text
    assert "k8s.io/externaljwt => k8s.io/externaljwt v0.34.1" in text


MODULE_SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: "REPLACE_ME_WITH_KUBE_CONFIG_PATH"
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
"""


def test_the_coscheduling_scheduler_runs_the_modules_profile_under_its_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GANGKEEPER_K8S_CACHE", str(tmp_path))
    config_file = neighbours.scheduler_plugins_root() / neighbours.COSCHEDULING_CONFIG
    config_file.parent.mkdir(parents=True)
    config_file.write_text(MODULE_SCHEDULER_CONFIG)
    config = coscheduling_config(Path("/sandbox/admin.kubeconfig"))
    [profile] = config["profiles"]
    # The name gangkeeper's coscheduling backend writes; kube-scheduler keeps the default.
    assert profile["schedulerName"] == "scheduler-plugins-scheduler"
    assert profile["plugins"]["queueSort"]["enabled"] == [{"name": "Coscheduling"}]
    assert profile["pluginConfig"][0]["args"] == {"permitWaitingTimeSeconds": 10}
    assert config["clientConnection"] == {"kubeconfig": "/sandbox/admin.kubeconfig"}
    assert config["leaderElection"] == {"leaderElect": False}


def test_the_scheduler_plugins_controller_and_its_elasticquota_crd_are_required_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built with the scheduler (same wrapper module); without it, or without the
    ElasticQuota CRD its manager needs, `sandbox up` names what to build."""
    monkeypatch.setenv("GANGKEEPER_K8S_CACHE", str(tmp_path))
    scheduler = neighbours.scheduler_plugins_binary()
    scheduler.parent.mkdir(parents=True)
    scheduler.write_text("")
    scheduler.chmod(0o755)
    (neighbours.scheduler_plugins_root() / neighbours.COSCHEDULING_CRD_DIR).mkdir(parents=True)
    with pytest.raises(neighbours.BinariesMissing) as missing:
        neighbours.require_built(("scheduler-plugins",))
    message = str(missing.value)
    assert str(neighbours.scheduler_plugins_controller_binary()) in message
    assert neighbours.ELASTICQUOTA_CRD_DIR in message
    assert str(scheduler) + ")" not in message
    assert "deploy/sandbox/build.sh" in message
    assert "elasticquotas.scheduling.x-k8s.io" in neighbours.served_crds()


MODULE_WEBHOOKS = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
  objectSelector:
    matchExpressions: [{key: jobset.sigs.k8s.io/jobset-name, operator: Exists}]
---
apiVersion: v1
kind: Service
metadata: {name: webhook-service}
"""


def test_a_modules_webhooks_are_pointed_at_its_loopback_server_and_keep_their_selectors() -> None:
    running = RunningController(JOBSET_CONTROLLER, webhook_port=4321, health_port=1)
    rendered: list[Path] = []

    def kustomize(directory: Path) -> str:
        rendered.append(directory)
        return MODULE_WEBHOOKS

    docs = webhook_configurations(running, b"CA PEM", kustomize)
    assert rendered == [JOBSET_CONTROLLER.root / "config/components/webhook"]
    assert [d["metadata"]["name"] for d in docs] == ["jobset-mutating-webhook-configuration"]
    (webhook,) = docs[0]["webhooks"]
    assert webhook["clientConfig"] == {
        "url": "https://127.0.0.1:4321/mutate--v1-pod",
        "caBundle": base64.b64encode(b"CA PEM").decode(),
    }
    assert webhook["objectSelector"]["matchExpressions"][0]["key"] == (
        "jobset.sigs.k8s.io/jobset-name"
    )


def test_a_module_without_webhook_configurations_is_an_error_naming_the_rebuild() -> None:
    running = RunningController(LWS_CONTROLLER, webhook_port=1, health_port=1)
    with pytest.raises(neighbours.BinariesMissing, match=re.escape("build.sh")):
        webhook_configurations(running, b"", lambda _d: "kind: Service\n")


def test_kwok_plays_every_step_of_the_node_and_pod_lifecycle() -> None:
    text = resources.files("gangkeeper.webhook.sandbox").joinpath("data/kwok-stages.yaml")
    stages = list(yaml.safe_load_all(text.read_text()))
    by_kind: dict[str, list[str]] = {}
    for stage in stages:
        assert (stage["apiVersion"], stage["kind"]) == ("kwok.x-k8s.io/v1alpha1", "Stage")
        by_kind.setdefault(stage["spec"]["resourceRef"]["kind"], []).append(
            stage["metadata"]["name"]
        )
    assert by_kind == {
        "Node": ["node-initialize", "node-heartbeat"],
        "Pod": [
            "pod-start",
            "pod-ready",
            "pod-complete",
            "pod-terminate",
            "pod-delete",
        ],
    }
    complete = next(s for s in stages if s["metadata"]["name"] == "pod-complete")
    keys = [e["key"] for e in complete["spec"]["selector"]["matchExpressions"]]
    # Only pods that carry a duration ever finish; the rest run until deleted.
    assert '.metadata.annotations["pod-complete.stage.kwok.x-k8s.io/delay"]' in keys


def test_karpenter_builds_with_the_go_toolchain_its_module_needs_and_alone() -> None:
    script = (WRAPPERS / "build.sh").read_text()
    # sigs.k8s.io/karpenter v1.15.0 says `go 1.26.9`; the machine's Go is older.
    assert "karpenter_toolchain=go1.27.3" in script
    assert 'export GOTOOLCHAIN=$karpenter_toolchain' in script
    # In the default set, so that the README's one `build.sh` (and CI) builds what the
    # autoscaling tests need; only its own build changes toolchain.
    assert re.search(r"^all=\(.*\bkarpenter\b.*\)$", script, re.M), "in the default set"
    assert (WRAPPERS / "karpenter" / "go.mod").read_text().startswith(
        "module gangkeeper.io/sandbox/karpenter\n\ngo 1.26.9\n"
    )


def test_the_provisioning_request_crd_is_copied_in_the_default_build() -> None:
    script = (WRAPPERS / "build.sh").read_text()
    # CI's one build.sh run must copy the CRD the ProvisioningRequest tests install.
    assert re.search(r"^all=\(.*\bprovisioning-request\b.*\)$", script, re.M)
    assert "copy_module_dirs provisioning-request k8s.io/autoscaler/cluster-autoscaler/apis" \
        in script


def test_karpenter_instance_types_offer_eight_gpu_nodes_in_its_file_format() -> None:
    import json

    text = resources.files("gangkeeper.webhook.sandbox").joinpath(
        "data/karpenter-instance-types.json"
    ).read_text()
    types = json.loads(text)
    assert types and all(t["resources"]["nvidia.com/gpu"] == "8" for t in types)
    for t in types:  # the fields kwok/cloudprovider/helpers.go reads
        assert set(t) == {"name", "offerings", "architecture", "operatingSystems", "resources"}
        assert all({"Price", "Available", "Requirements"} <= set(o) for o in t["offerings"])


def test_kuberay_runs_without_its_webhook_and_its_dashboard_calls_stay_on_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gangkeeper.webhook.sandbox.kuberay import operator_env

    # ray-operator's main.go sets up its RayCluster webhook only for ENABLE_WEBHOOKS=true.
    monkeypatch.setenv("ENABLE_WEBHOOKS", "true")
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    env = operator_env(Path("/sandbox/admin.kubeconfig"), "http://127.0.0.1:1")
    assert "ENABLE_WEBHOOKS" not in env
    assert env["KUBECONFIG"] == "/sandbox/admin.kubeconfig"
    assert (env["HTTP_PROXY"], env["HTTPS_PROXY"]) == ("http://127.0.0.1:1",) * 2
    assert "https_proxy" not in env


def test_kueue_runs_without_wait_for_pods_ready_unless_the_sandbox_is_given_it(
    tmp_path: Path,
) -> None:
    from gangkeeper.webhook.sandbox.kueue import configuration

    plain = configuration(9443, 8081, tmp_path)
    assert "waitForPodsReady" not in plain
    ready = {"timeout": "10s", "blockAdmission": True}
    added = configuration(9443, 8081, tmp_path, {"waitForPodsReady": ready})
    assert added["waitForPodsReady"] == ready
    # The sandbox's own wiring is unchanged by what is added.
    assert {k: v for k, v in added.items() if k != "waitForPodsReady"} == plain


def test_a_kueue_config_replacing_the_sandboxs_wiring_is_refused_naming_the_key(
    tmp_path: Path,
) -> None:
    from gangkeeper.webhook.sandbox import Sandbox

    with pytest.raises(ValueError, match=r"kueue_config: webhook set by the sandbox itself"):
        Sandbox(tmp_path, kueue_config={"webhook": {"port": 1}, "waitForPodsReady": {}})
