"""The pod webhooks' CEL match conditions, evaluated on pods with a CEL implementation.

The API server is the authority (tests/deploy/test_webhook_selection.py registers the
same conditions against a real one); these evaluate the rendered text with the
`common-expression-language` package, so which pods reach gangkeeper for a given
config is checked without a cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cel
import pytest
import yaml

from gangkeeper.certs import ensure_local
from gangkeeper.policies.settings.config import load_config
from gangkeeper.webhook.cli.main import main
from gangkeeper.webhook.install import render_manifests
from gangkeeper.webhook.sandbox import registration


def pod(limits: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "trainer:1"}
    if limits is not None:
        container["resources"] = {"limits": limits}
    return {"metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}


def reaches_gangkeeper(objects: list[dict[str, Any]], body: dict[str, Any]) -> dict[str, bool]:
    """{webhook name: whether every match condition is true for a CREATE of `body`}."""
    answers = {}
    for obj in objects:
        for hook in obj.get("webhooks", []):
            if "matchConditions" not in hook:
                continue
            context = {"object": body, "request": {"operation": "CREATE"}}
            answers[hook["name"]] = all(
                cel.evaluate(c["expression"], context) is True for c in hook["matchConditions"]
            )
    return answers


POD_WEBHOOKS = {"pods.mutate.gangkeeper.io", "pods.validate.gangkeeper.io"}


@pytest.mark.parametrize(
    ("resources", "body", "called"),
    [
        pytest.param(None, pod({"nvidia.com/gpu": "1"}), True, id="default-gpu"),
        pytest.param(None, pod({"google.com/tpu": "4"}), False, id="tpu-not-configured"),
        pytest.param(("google.com/tpu",), pod({"google.com/tpu": "4"}), True, id="tpu-configured"),
        pytest.param(
            ("aws.amazon.com/neuron*",), pod({"aws.amazon.com/neuroncore": "2"}), True,
            id="neuron-pattern",
        ),
        pytest.param(("google.com/tpu",), pod({"nvidia.com/gpu": "1"}), False,
                     id="configured-list-replaces-the-default"),
        pytest.param(("google.com/tpu",), pod({"cpu": "1"}), False, id="cpu-pod"),
        pytest.param(("google.com/tpu",), pod(), False, id="no-resources"),
    ],
)  # fmt: skip
def test_pods_asking_for_a_configured_accelerator_reach_the_pod_webhooks(
    resources: tuple[str, ...] | None, body: dict[str, Any], called: bool
) -> None:
    kwargs = {} if resources is None else {"gpu_resources": resources}
    answers = reaches_gangkeeper(render_manifests(**kwargs), body)
    assert set(answers) == POD_WEBHOOKS
    assert answers == dict.fromkeys(POD_WEBHOOKS, called)


CLAIM = {"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}


@pytest.mark.parametrize(
    ("body", "called"),
    [
        pytest.param(pod(resourceClaims=[CLAIM]), True, id="claim-from-template"),
        pytest.param(pod(resourceClaims=[{"name": "shared", "resourceClaimName": "rack-1"}]),
                     True, id="shared-claim"),
        pytest.param(pod({"cpu": "1"}, resourceClaims=[CLAIM]), True, id="cpu-limits-and-a-claim"),
        pytest.param(pod(resourceClaims=[]), False, id="empty-claim-list"),
        pytest.param(pod({"cpu": "1"}), False, id="neither"),
    ],
)  # fmt: skip
def test_pods_asking_for_devices_through_resource_claims_reach_the_pod_webhooks(
    body: dict[str, Any], called: bool
) -> None:
    """DRA (resource.k8s.io/v1): a pod's devices are in `spec.resourceClaims`, its
    containers' limits name none."""
    assert reaches_gangkeeper(render_manifests(), body) == dict.fromkeys(POD_WEBHOOKS, called)


def test_gangkeeper_manifests_config_makes_a_tpu_pod_reach_gangkeeper(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("gpuResources: [google.com/tpu]\n")
    assert main(["manifests", "--config", str(config)]) == 0
    objects = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert reaches_gangkeeper(objects, pod({"google.com/tpu": "4"})) == dict.fromkeys(
        POD_WEBHOOKS, True
    )
    (configmap,) = (o for o in objects if o["kind"] == "ConfigMap")
    # The server counts as GPUs what the filter lets through.
    assert load_config(yaml.safe_load(configmap["data"]["config.yaml"])).gpu_resources == (
        "google.com/tpu",
    )


def test_gangkeeper_manifests_refuses_a_bad_config_naming_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("gpuResources: []\n")
    assert main(["manifests", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and "gpuResources" in err


class RecordingKubectl:
    def __init__(self) -> None:
        self.applied: list[str] = []

    def must(self, *args: str, input: str) -> None:
        self.applied.append(input)


def test_the_sandbox_registers_the_webhooks_for_the_config_gangkeeper_serves(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("gpuResources: [google.com/tpu]\n")
    ca = ensure_local(tmp_path / "certs", ["localhost"], ["127.0.0.1"]).ca_cert
    kubectl = RecordingKubectl()
    registration.register_webhooks(
        kubectl, "https://127.0.0.1:8443", ca, None, config  # type: ignore[arg-type]
    )
    (applied,) = kubectl.applied
    objects = [d for d in yaml.safe_load_all(applied) if d]
    assert reaches_gangkeeper(objects, pod({"google.com/tpu": "4"})) == dict.fromkeys(
        POD_WEBHOOKS, True
    )
