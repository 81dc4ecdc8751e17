"""The Helm chart `deploy/helm/gangkeeper`, rendered and checked by the real helm.

- `helm lint --strict` passes;
- `helm template` with the defaults and with several value sets gives, object for
  object, what `gangkeeper manifests` prints for the same choices (namespace, backend,
  certificate mode, image, `--url`), and each of the other values changes exactly the
  fields it names;
- the whole config rendered into the ConfigMap is a config `gangkeeper serve` loads;
- `values.schema.json` makes helm refuse bad values with a message naming the key.

No cluster: `helm template` renders offline. helm comes from `deploy/sandbox/build.sh
helm`; without it these tests skip (fail under `GANGKEEPER_E2E=require`).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_support import REPO

from gangkeeper.certs import ensure_local
from gangkeeper.policies.settings.config import CONFIG_KEYS, load_config

CHART = REPO / "deploy" / "helm" / "gangkeeper"
DASHBOARD = REPO / "deploy" / "grafana" / "gangkeeper-dashboard.json"
Objects = dict[tuple[str, str], dict[str, Any]]


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, check=False, timeout=120
    )


def template(
    helm: Path, tmp_path: Path, values: dict[str, Any], namespace: str = "gangkeeper-system"
) -> Objects:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = run_helm(helm, "template", "gangkeeper", str(CHART), "-n", namespace, "-f", str(path))
    assert done.returncode == 0, done.stderr
    return keyed(yaml.safe_load_all(done.stdout))


def manifests(*args: str) -> Objects:
    """What `gangkeeper manifests ARGS` prints, without the Namespace (Helm installs
    into `--namespace`)."""
    done = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "manifests", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return {
        k: v for k, v in keyed(yaml.safe_load_all(done.stdout)).items() if k[0] != "Namespace"
    }


def keyed(docs: Any) -> Objects:
    """Objects by (kind, name); Helm orders them by kind itself. The config file is
    compared as data (Helm's toYaml and PyYAML lay it out differently)."""
    objects: Objects = {}
    for doc in docs:
        if not doc:
            continue
        key = (doc["kind"], doc["metadata"]["name"])
        assert key not in objects, f"{key} rendered twice"
        if doc["kind"] == "ConfigMap" and "config.yaml" in doc.get("data", {}):
            doc["data"]["config.yaml"] = yaml.safe_load(doc["data"]["config.yaml"])
        objects[key] = doc
    return objects


def without_checksum(objects: Objects) -> Objects:
    """The one addition of the chart to every value set: a checksum of the config on
    the pod template, so that `helm upgrade` with a new config rolls the pods."""
    out = copy.deepcopy(objects)
    deployments = [k for k in out if k[0] == "Deployment"]
    assert deployments, "the chart renders its Deployments"
    for key in deployments:  # the webhook's and the controller's (or the single one)
        meta = out[key]["spec"]["template"]["metadata"]
        assert len(meta["annotations"].pop("checksum/config")) == 64
        if not meta["annotations"]:
            del meta["annotations"]
    return out


def pod_spec(objects: Objects, name: str = "gangkeeper") -> dict[str, Any]:
    spec: dict[str, Any] = objects["Deployment", name]["spec"]["template"]["spec"]
    return spec


def hooks(objects: Objects) -> list[dict[str, Any]]:
    return [
        hook
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in objects[kind, f"gangkeeper-{kind[:-len('WebhookConfiguration')].lower()}"][
            "webhooks"
        ]
    ]


# --- lint and the defaults ------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"certMode": "cert-manager", "webhook": {"url": "https://gk.example"}},
        {
            "metrics": {"service": {"enabled": True}, "serviceMonitor": {"enabled": True}},
            "networkPolicy": {"enabled": True},
            "grafanaDashboard": {"enabled": True},
        },
    ],
    ids=["defaults", "cert-manager-url", "everything-optional-on"],
)
def test_helm_lint_strict_passes(helm_bin: Path, tmp_path: Path, values: dict[str, Any]) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    done = run_helm(helm_bin, "lint", "--strict", str(CHART), "-f", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_the_defaults_render_exactly_what_gangkeeper_manifests_prints(
    helm_bin: Path, tmp_path: Path
) -> None:
    rendered = without_checksum(template(helm_bin, tmp_path, {}))
    assert rendered == manifests()


@pytest.mark.parametrize(
    ("namespace", "values", "args"),
    [
        ("ml-platform", {"config": {"backend": "volcano"}}, ["--backend", "volcano"]),
        (
            "ml-platform",
            {"certMode": "cert-manager", "config": {"backend": "coscheduling"}},
            ["--cert-mode", "cert-manager", "--backend", "coscheduling"],
        ),
        (
            "gangkeeper-system",
            {"image": {"repository": "registry.example/gk", "tag": "9.9.9"}},
            ["--image", "registry.example/gk:9.9.9"],
        ),
        ("gangkeeper-system", {"config": {"backend": "native"}}, ["--backend", "native"]),
        ("gangkeeper-system", {"config": {"autoscaling": "off"}}, ["--autoscaling", "off"]),
    ],
    ids=["volcano-in-ml-platform", "cert-manager-coscheduling", "image", "native",
         "autoscaling-off"],
)
def test_value_sets_render_what_gangkeeper_manifests_prints_for_the_same_choices(
    helm_bin: Path, tmp_path: Path, namespace: str, values: dict[str, Any], args: list[str]
) -> None:
    rendered = without_checksum(template(helm_bin, tmp_path, values, namespace))
    assert rendered == manifests("--namespace", namespace, *args)


@pytest.mark.parametrize(
    "gpu_resources",
    [["google.com/tpu"], ["aws.amazon.com/neuron*", "nvidia.com/gpu"], ["vendor.example/it's"]],
    ids=["tpu", "pattern-and-name", "quote-in-name"],
)
def test_configured_gpu_resources_render_the_match_conditions_gangkeeper_manifests_prints(
    helm_bin: Path, tmp_path: Path, gpu_resources: list[str]
) -> None:
    config = {"backend": "gate", "gpuResources": gpu_resources}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    rendered = without_checksum(template(helm_bin, tmp_path, {"config": config}))
    assert rendered == manifests("--config", str(path))
    conditions = " ".join(
        c["expression"] for hook in hooks(rendered) for c in hook.get("matchConditions", [])
    )
    assert gpu_resources[0].rstrip("*").replace("'", "\\'") in conditions


def test_webhook_url_renders_the_webhooks_of_gangkeeper_manifests_url(
    helm_bin: Path, tmp_path: Path
) -> None:
    ensure_local(tmp_path / "certs", ["localhost"], ["127.0.0.1"])
    ca = tmp_path / "certs" / "ca.crt"
    url = "https://127.0.0.1:8443"
    values = {"webhook": {"url": url, "caBundle": ca.read_text()}}
    rendered = without_checksum(template(helm_bin, tmp_path, values))
    expected = manifests()
    expected.update(manifests("--url", url, "--ca-bundle", str(ca)))
    assert rendered == expected


def test_webhook_url_with_cert_manager_drops_the_ca_injection(
    helm_bin: Path, tmp_path: Path
) -> None:
    values = {"certMode": "cert-manager", "webhook": {"url": "https://gk.example:443/"}}
    rendered = template(helm_bin, tmp_path, values)
    for hook in hooks(rendered):
        assert hook["clientConfig"]["url"].startswith("https://gk.example:443/")
        assert "//mutate" not in hook["clientConfig"]["url"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (obj,) = [o for k, o in rendered.items() if k[0] == kind]
        assert "annotations" not in obj["metadata"]


# --- each value changes what it names -----------------------------------------------------


PLATFORM_VALUES: dict[str, Any] = {
    "replicaCount": 3,
    "image": {"pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "regcred"}],
    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
    "affinity": None,  # null removes the default anti-affinity (Helm deletes the key)
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "gangkeeper"}},
        }
    ],
    "priorityClassName": "system-cluster-critical",
    "podAnnotations": {"example.com/owner": "ml-platform"},
    "podLabels": {"team": "ml-platform"},
    "webhook": {
        "timeoutSeconds": 10,
        "mutating": {"failurePolicy": "Ignore"},
        "validating": {"failurePolicy": "Fail"},
        "namespaceSelector": {
            "matchLabels": {"tier": "training"},
            "matchExpressions": [{"key": "sandboxed", "operator": "DoesNotExist"}],
        },
    },
    "podDisruptionBudget": {"minAvailable": 2},
}


def test_platform_values_change_exactly_the_fields_they_name(
    helm_bin: Path, tmp_path: Path
) -> None:
    rendered = template(helm_bin, tmp_path, PLATFORM_VALUES)
    meta = rendered["Deployment", "gangkeeper"]["spec"]["template"]["metadata"]
    assert meta["annotations"]["example.com/owner"] == "ml-platform"
    expected = manifests()
    # replicaCount, resources and affinity are the webhook's (the controller's are under
    # `controller`); the pod-level values apply to the pods of both Deployments.
    webhook = expected["Deployment", "gangkeeper"]
    webhook["spec"]["replicas"] = 3
    del webhook["spec"]["template"]["spec"]["affinity"]
    (container,) = webhook["spec"]["template"]["spec"]["containers"]
    container["resources"] = PLATFORM_VALUES["resources"]
    for name in ("gangkeeper", "gangkeeper-controller"):
        deployment = expected["Deployment", name]
        template_meta = deployment["spec"]["template"]["metadata"]
        template_meta["labels"]["team"] = "ml-platform"
        template_meta["annotations"] = {"example.com/owner": "ml-platform"}
        spec = deployment["spec"]["template"]["spec"]
        for key in (
            "imagePullSecrets",
            "nodeSelector",
            "tolerations",
            "topologySpreadConstraints",
            "priorityClassName",
        ):
            spec[key] = PLATFORM_VALUES[key]
        (container,) = spec["containers"]
        container["imagePullPolicy"] = "Always"
    expected["PodDisruptionBudget", "gangkeeper"]["spec"]["minAvailable"] = 2
    for hook in hooks(expected):
        hook["timeoutSeconds"] = 10
        hook["failurePolicy"] = "Ignore" if hook["name"].startswith("pods.mutate") else "Fail"
        selector = hook["namespaceSelector"]
        selector["matchLabels"]["tier"] = "training"
        selector["matchExpressions"].append({"key": "sandboxed", "operator": "DoesNotExist"})
    assert without_checksum(rendered) == expected


def test_controller_values_size_and_spread_only_the_controllers_deployment(
    helm_bin: Path, tmp_path: Path
) -> None:
    resources = {"requests": {"cpu": "50m", "memory": "96Mi"}, "limits": {"memory": "768Mi"}}
    values = {"controller": {"replicaCount": 1, "resources": resources, "affinity": None}}
    rendered = template(helm_bin, tmp_path, values)
    expected = manifests()
    controller = expected["Deployment", "gangkeeper-controller"]
    controller["spec"]["replicas"] = 1
    del controller["spec"]["template"]["spec"]["affinity"]
    (container,) = controller["spec"]["template"]["spec"]["containers"]
    container["resources"] = resources
    assert without_checksum(rendered) == expected


def test_single_process_renders_what_manifests_single_process_prints(
    helm_bin: Path, tmp_path: Path
) -> None:
    rendered = template(helm_bin, tmp_path, {"singleProcess": True})
    assert without_checksum(rendered) == manifests("--single-process")
    assert ("Deployment", "gangkeeper-controller") not in rendered


def test_the_pod_disruption_budget_can_be_left_out(helm_bin: Path, tmp_path: Path) -> None:
    rendered = template(helm_bin, tmp_path, {"podDisruptionBudget": {"enabled": False}})
    expected = manifests()
    del expected["PodDisruptionBudget", "gangkeeper"]
    assert without_checksum(rendered) == expected


def test_metrics_service_and_service_monitor_scrape_metrics_over_tls(
    helm_bin: Path, tmp_path: Path
) -> None:
    values = {
        "metrics": {
            "service": {"enabled": True},
            "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        }
    }
    rendered = template(helm_bin, tmp_path, values)
    service = rendered["Service", "gangkeeper-metrics"]
    # The webhook's and the controller's pods (the gang metrics are the controller's).
    assert service["spec"]["selector"] == {"app.kubernetes.io/part-of": "gangkeeper"}
    for name in ("gangkeeper", "gangkeeper-controller"):
        labels = rendered["Deployment", name]["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items()
    assert service["spec"]["ports"] == [
        {"name": "https-metrics", "port": 8443, "targetPort": "https", "protocol": "TCP"}
    ]
    monitor = rendered["ServiceMonitor", "gangkeeper"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    # It selects the metrics Service and not the webhook Service.
    selector = monitor["spec"]["selector"]["matchLabels"].items()
    assert selector <= service["metadata"]["labels"].items()
    assert not selector <= rendered["Service", "gangkeeper"]["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "https-metrics"
    assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
    assert endpoint["tlsConfig"]["serverName"] == "gangkeeper.gangkeeper-system.svc"
    # The Service gangkeeper serves the webhooks from is unchanged.
    assert rendered["Service", "gangkeeper"] == manifests()["Service", "gangkeeper"]


def test_a_service_monitor_without_the_metrics_service_is_refused(
    helm_bin: Path, tmp_path: Path
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump({"metrics": {"serviceMonitor": {"enabled": True}}}))
    done = run_helm(helm_bin, "template", "gk", str(CHART), "-f", str(path))
    assert done.returncode != 0
    assert "metrics.service.enabled" in done.stderr


def test_the_network_policy_admits_the_https_port_only(helm_bin: Path, tmp_path: Path) -> None:
    peers = [{"ipBlock": {"cidr": "10.0.0.0/8"}}]
    rendered = template(
        helm_bin, tmp_path, {"networkPolicy": {"enabled": True, "ingressFrom": peers}}
    )
    policy = rendered["NetworkPolicy", "gangkeeper"]["spec"]
    assert policy["podSelector"] == {"matchLabels": {"app.kubernetes.io/part-of": "gangkeeper"}}
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"ports": [{"port": 8443, "protocol": "TCP"}], "from": peers}]
    for name in ("gangkeeper", "gangkeeper-controller"):
        (container,) = pod_spec(rendered, name)["containers"]
        assert [p["containerPort"] for p in container["ports"]] == [8443]


def test_the_dashboard_configmap_carries_the_sidecar_label_and_the_shipped_json(
    helm_bin: Path, tmp_path: Path
) -> None:
    rendered = template(
        helm_bin, tmp_path, {"grafanaDashboard": {"enabled": True, "namespace": "monitoring"}}
    )
    dashboard = rendered["ConfigMap", "gangkeeper-dashboard"]
    assert dashboard["metadata"]["namespace"] == "monitoring"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(DASHBOARD.read_text())
    assert json.loads(dashboard["data"]["gangkeeper.json"]) == shipped
    assert (CHART / "files" / "dashboard.json").read_text() == DASHBOARD.read_text(), (
        "deploy/helm/gangkeeper/files/dashboard.json differs from deploy/grafana/: "
        "run deploy/generate.sh"
    )


# --- the config -------------------------------------------------------------------------

FULL_CONFIG: dict[str, Any] = {
    "backend": "coscheduling",
    "namespaceBackends": {"team-v": "volcano"},
    "gpuResources": ["nvidia.com/gpu", "nvidia.com/mig-*"],
    "schedulerNames": {"coscheduling": "scheduler-plugins-scheduler"},
    "onConflict": "reject",
    "onUnreadable": "reject",
    "gangTimeoutSeconds": 600,
    "pools": [
        {
            "name": "a100-spot",
            "maxCount": 16,
            "labels": {"pool": "a100-spot"},
            "taints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}],
            "allocatable": {"nvidia.com/gpu": 8, "cpu": "96", "memory": "1Ti"},
        }
    ],
    "nodeIdentityLabels": ["kubernetes.io/hostname", "example.com/rack-slot"],
    "trainerResourcesPerNode": "merge",
    "placement": "scheduler",
    "namespacePlacement": {"team-p": "pinned"},
    "preemption": "off",
    "namespacePreemption": {"team-p": "lowerPriority"},
    "rebindSeconds": 30,
    "rebindRetries": 2,
    "rebindScope": "gang",
    "podsReadyTimeoutSeconds": 600,
    "podsReadyRequeue": True,
    "topology": ["topology.kubernetes.io/zone"],
    "autoscaling": "placeholders",
    "namespaceAutoscaling": {"team-fixed": "off"},
    "clusterAutoscales": True,
    "provisioningTimeoutSeconds": 900,
    "provisioningRetrySeconds": 120,
    "placeholders": {"image": "registry.k8s.io/pause:3.10", "priorityClassName": "gk-hold"},
    "provisioningRequest": {"className": "check-capacity.autoscaling.x-k8s.io", "retryLimit": 2},
}


def test_the_schema_knows_every_config_key_and_only_those() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(schema["properties"]["config"]["properties"]) == CONFIG_KEYS
    assert set(FULL_CONFIG) == CONFIG_KEYS


def test_the_whole_config_is_rendered_into_the_configmap_and_loads(
    helm_bin: Path, tmp_path: Path
) -> None:
    rendered = template(helm_bin, tmp_path, {"config": FULL_CONFIG})
    config = rendered["ConfigMap", "gangkeeper-config"]["data"]["config.yaml"]
    assert config == FULL_CONFIG
    loaded = load_config(config)
    assert (loaded.backend, loaded.pools[0].max_count) == ("coscheduling", 16)
    checksum = rendered["Deployment", "gangkeeper"]["spec"]["template"]["metadata"]
    default = template(helm_bin, tmp_path, {})["Deployment", "gangkeeper"]["spec"]
    assert (
        checksum["annotations"]["checksum/config"]
        != default["template"]["metadata"]["annotations"]["checksum/config"]
    )


# --- the schema refuses bad values, naming the key -----------------------------------------


@pytest.mark.parametrize(
    ("flag", "key"),
    [
        ("replicaCount=two", "replicaCount"),
        ("replicas=2", "replicas"),
        ("certMode=vault", "certMode"),
        ("config.backend=slurm", "backend"),
        ("config.onConflict=maybe", "onConflict"),
        ("config.gangTimeoutSeconds=0", "gangTimeoutSeconds"),
        ("config.rebindScope=pods", "rebindScope"),
        ("config.bakend=gate", "bakend"),
        ("config.pools[0].name=p,config.pools[0].maxCount=0", "maxCount"),
        ("webhook.url=http://gk.example", "url"),
        ("webhook.timeoutSeconds=60", "timeoutSeconds"),
        ("webhook.mutating.failurePolicy=Sometimes", "failurePolicy"),
        ("image.pullPolicy=Sometimes", "pullPolicy"),
        ("webhook.caBundle=not-a-pem", "caBundle"),
    ],
)
def test_bad_values_are_refused_naming_the_key(helm_bin: Path, flag: str, key: str) -> None:
    done = run_helm(helm_bin, "template", "gk", str(CHART), "--set", flag)
    assert done.returncode != 0, f"--set {flag} was accepted"
    assert "values don't meet the specifications of the schema" in done.stderr
    assert key in done.stderr, done.stderr


# --- objects the renderer gains reach the chart without a template ---------------------


def test_an_object_the_renderer_adds_is_carried_into_the_chart(
    helm_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from gangkeeper.webhook.install import helm as chart_data

    added = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "gangkeeper-example"},
        "spec": {
            "policyName": "gangkeeper-example",
            "matchResources": {"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                 "values": ["gangkeeper-system"]}
            ]}},
        },
    }  # fmt: skip
    real = chart_data.render_manifests
    monkeypatch.setattr(
        chart_data, "render_manifests", lambda *a, **k: [*real(*a, **k), copy.deepcopy(added)]
    )
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    for name, text in chart_data.helm_chart_files().items():
        (chart / name).write_text(text)
    done = run_helm(helm_bin, "template", "gk", str(chart), "-n", "ml-platform")
    assert done.returncode == 0, done.stderr
    rendered = keyed(yaml.safe_load_all(done.stdout))
    binding = rendered["ValidatingAdmissionPolicyBinding", "gangkeeper-example"]
    selector = binding["spec"]["matchResources"]["namespaceSelector"]
    assert selector["matchExpressions"][0]["values"] == ["ml-platform"]


@pytest.mark.parametrize(
    "config",
    [{"autoscaling": "provisioningrequest"},
     {"namespaceAutoscaling": {"team-ca": "provisioningrequest"}}],
)
def test_asking_through_provisioning_requests_adds_exactly_their_rules(
    helm_bin: Path, tmp_path: Path, config: dict[str, Any]
) -> None:
    rendered = template(helm_bin, tmp_path, {"config": config})
    expected = manifests("--autoscaling", "provisioningrequest")
    role = ("ClusterRole", "gangkeeper")
    assert rendered[role]["rules"] == expected[role]["rules"]
    default = template(helm_bin, tmp_path, {})[role]["rules"]
    assert default == manifests()[role]["rules"]
    assert not any("provisioningrequests" in r["resources"] for r in default)


def test_autoscaling_off_everywhere_leaves_out_the_placeholders_priority_class_and_rules(
    helm_bin: Path, tmp_path: Path
) -> None:
    """Before, the chart granted create/delete on pods and installed the placeholders'
    PriorityClass even with `autoscaling: off`, where no placeholder is ever made."""
    role = ("ClusterRole", "gangkeeper")
    off = template(helm_bin, tmp_path, {"config": {"autoscaling": "off"}})
    assert not any(k[0] == "PriorityClass" for k in off)
    assert not any("create" in r["verbs"] and r["resources"] == ["pods"]
                   for r in off[role]["rules"])
    # One namespace that still uses placeholders needs them all back.
    one = template(helm_bin, tmp_path, {"config": {
        "autoscaling": "off", "namespaceAutoscaling": {"team-a": "placeholders"}}})
    expected = manifests()
    assert one[role]["rules"] == expected[role]["rules"]
    assert {k for k in one if k[0] == "PriorityClass"} == {
        k for k in expected if k[0] == "PriorityClass"} != set()
