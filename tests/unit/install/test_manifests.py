"""The rendered manifests: what the cluster relies on, and that deploy/ never drifts from them.

The committed `deploy/base` must be byte-for-byte what `gangkeeper manifests --write`
produces, and every workload kind a recogniser validates must have a webhook rule, so
adding a recogniser without regenerating deploy/ fails here. Whether the API server
accepts the objects (CEL included) is checked in tests/deploy against a real one.
"""

from __future__ import annotations

import argparse
import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from gangkeeper.certs import ensure_local
from gangkeeper.policies.recognizers.registry import default_registry
from gangkeeper.policies.settings.config import load_config
from gangkeeper.webhook.cli import manifests as manifests_command
from gangkeeper.webhook.install import (
    BACKENDS,
    DEFAULT_IMAGE,
    Manifest,
    dump_yaml,
    helm_chart_files,
    render_manifests,
    rule_reason,
)

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"


def by_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objects if o["kind"] == kind]


def one(objects: list[Manifest], kind: str) -> Manifest:
    found = by_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def hooks(objects: list[Manifest]) -> dict[str, Manifest]:
    return {
        h["name"]: h
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for h in one(objects, kind)["webhooks"]
    }


def named(objects: list[Manifest], kind: str, name: str) -> Manifest:
    (found,) = [o for o in by_kind(objects, kind) if o["metadata"]["name"] == name]
    return found


def pod_template(objects: list[Manifest], name: str = "gangkeeper") -> Manifest:
    spec: Manifest = named(objects, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def pod_labels(objects: list[Manifest], name: str) -> dict[str, str]:
    labels: dict[str, str] = named(objects, "Deployment", name)["spec"]["template"][
        "metadata"]["labels"]
    return labels


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


#: Both shapes of the installation: the default two Deployments and the single process.
SHAPES = [
    pytest.param({}, ("gangkeeper", "gangkeeper-controller"), id="split"),
    pytest.param({"single_process": True}, ("gangkeeper",), id="single-process"),
]


def run_manifests(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    manifests_command.register(parser.add_subparsers())
    args = parser.parse_args(["manifests", *argv])
    code: int = args.run(args)
    return code


# --- deploy/ never drifts from the renderer ----------------------------------------------


def test_committed_base_is_exactly_what_the_renderer_writes(tmp_path: Path) -> None:
    assert run_manifests(["--write", str(tmp_path)]) == 0
    committed = {p.name: p.read_text() for p in (DEPLOY / "base").iterdir()}
    fresh = {p.name: p.read_text() for p in tmp_path.iterdir()}
    assert sorted(committed) == sorted(fresh)
    for name, text in fresh.items():
        assert committed[name] == text, (
            f"deploy/base/{name} is stale: run deploy/generate.sh and commit the result"
        )


def test_cert_manager_overlay_resources_are_what_the_renderer_writes(tmp_path: Path) -> None:
    assert run_manifests(["--cert-mode", "cert-manager", "--write", str(tmp_path)]) == 0
    overlay = DEPLOY / "overlays" / "cert-manager" / "certificate.yaml"
    assert overlay.read_text() == (tmp_path / "certificate.yaml").read_text()


def test_coscheduling_overlay_changes_only_the_backend_in_the_config() -> None:
    patch = yaml.safe_load((DEPLOY / "overlays" / "coscheduling" / "config.yaml").read_text())
    rendered = one(render_manifests(backend="coscheduling"), "ConfigMap")
    assert patch["metadata"]["name"] == rendered["metadata"]["name"]
    assert patch["data"] == rendered["data"]
    base = render_manifests()
    others = [o for o in render_manifests(backend="coscheduling") if o["kind"] != "ConfigMap"]
    assert others == [o for o in base if o["kind"] != "ConfigMap"]


def test_top_level_kustomization_installs_the_base() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["base"]


RECOGNISER_RULES = [
    pytest.param(rule, id=f"{r.name}:{rule.group}/{rule.resource}")
    for r in default_registry()
    for rule in r.rules
]


@pytest.mark.parametrize("rule", RECOGNISER_RULES)
def test_every_recognised_workload_kind_is_validated_on_create_and_update(rule: Any) -> None:
    # Read from the committed YAML: what `kubectl apply -k deploy/` actually installs.
    docs = list(yaml.safe_load_all((DEPLOY / "base" / "webhooks.yaml").read_text()))
    workload_hook = hooks([d for d in docs if d])["workloads.validate.gangkeeper.io"]
    matching = [
        r
        for r in workload_hook["rules"]
        if rule.group in r["apiGroups"]
        and rule.resource in r["resources"]
        and set(rule.versions) <= set(r["apiVersions"])
    ]
    assert matching, f"no webhook rule for {rule.group}/{rule.resource}"
    assert {"CREATE", "UPDATE"} <= set(matching[0]["operations"])


def test_there_are_recogniser_rules_to_check() -> None:
    assert len(RECOGNISER_RULES) >= 10


# --- webhook configurations --------------------------------------------------------------


@pytest.mark.parametrize("namespace", ["gangkeeper-system", "gk-test"])
def test_webhooks_only_match_opted_in_namespaces_never_kube_system_or_our_own(
    namespace: str,
) -> None:
    for name, hook in hooks(render_manifests(namespace)).items():
        selector = hook["namespaceSelector"]
        assert selector["matchLabels"] == {"gangkeeper.io/enabled": "true"}, name
        (expr,) = selector["matchExpressions"]
        assert expr["key"] == "kubernetes.io/metadata.name"
        assert expr["operator"] == "NotIn"
        assert set(expr["values"]) == {"kube-system", namespace}


def test_webhooks_honour_the_skip_label_and_declare_no_side_effects() -> None:
    for name, hook in hooks(render_manifests()).items():
        assert hook["objectSelector"] == {
            "matchExpressions": [
                {"key": "gangkeeper.io/skip", "operator": "NotIn", "values": ["true"]}
            ]
        }, name
        assert hook["sideEffects"] == "None"
        assert hook["timeoutSeconds"] == 5
        assert hook["admissionReviewVersions"] == ["v1"]


def test_mutation_fails_closed_validation_fails_open_and_mutation_is_reinvoked() -> None:
    found = hooks(render_manifests())
    assert found["pods.mutate.gangkeeper.io"]["failurePolicy"] == "Fail"
    assert found["pods.mutate.gangkeeper.io"]["reinvocationPolicy"] == "IfNeeded"
    assert found["pods.validate.gangkeeper.io"]["failurePolicy"] == "Ignore"
    assert found["workloads.validate.gangkeeper.io"]["failurePolicy"] == "Ignore"


def test_pod_webhooks_see_only_pod_creates_behind_match_conditions() -> None:
    found = hooks(render_manifests())
    for name in ("pods.mutate.gangkeeper.io", "pods.validate.gangkeeper.io"):
        (rule,) = found[name]["rules"]
        assert rule["resources"] == ["pods"] and rule["operations"] == ["CREATE"]
        expressions = " ".join(c["expression"] for c in found[name]["matchConditions"])
        for needle in ("nvidia.com/gpu", "initContainers", "gangkeeper.io/gang-name", "CREATE"):
            assert needle in expressions, f"{name} match conditions miss {needle}"
    assert "matchConditions" not in found["workloads.validate.gangkeeper.io"]


def test_service_webhooks_point_at_the_service_paths() -> None:
    found = hooks(render_manifests("gk"))
    paths = {name: h["clientConfig"]["service"] for name, h in found.items()}
    assert paths["pods.mutate.gangkeeper.io"]["path"] == "/mutate"
    assert paths["pods.validate.gangkeeper.io"]["path"] == "/validate"
    assert {p["namespace"] for p in paths.values()} == {"gk"}
    assert {p["port"] for p in paths.values()} == {443}
    # Self-managed mode: gangkeeper injects the caBundle at run time.
    assert all("caBundle" not in h["clientConfig"] for h in found.values())


def test_url_form_registers_only_the_two_webhook_configurations(tmp_path: Path) -> None:
    paths = ensure_local(tmp_path, ["localhost"], ["127.0.0.1"])
    pem = paths.ca_cert.read_bytes()

    objects = render_manifests(url="https://127.0.0.1:9443/", ca_bundle=pem)

    assert [o["kind"] for o in objects] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    for name, hook in hooks(objects).items():
        config = hook["clientConfig"]
        assert "service" not in config
        assert base64.b64decode(config["caBundle"]) == pem
        expected = "/mutate" if "mutate" in name else "/validate"
        assert config["url"] == "https://127.0.0.1:9443" + expected


def test_gangkeeper_manifests_url_form_prints_parseable_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = ensure_local(tmp_path, ["localhost"], ["127.0.0.1"])
    argv = ["--url", "https://127.0.0.1:8443", "--ca-bundle", str(paths.ca_cert)]
    assert run_manifests(argv) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert {d["metadata"]["name"] for d in docs} == {
        "gangkeeper-mutating",
        "gangkeeper-validating",
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "https://127.0.0.1:8443"], "go together"),
        (["--url", "https://x", "--ca-bundle", "/nonexistent/ca.crt"], "/nonexistent/ca.crt"),
        (["--url", "http://127.0.0.1:8443", "--ca-bundle", "CA"], "https://"),
        (["--url", "https://127.0.0.1:8443", "--ca-bundle", "NOTPEM"], "PEM"),
        (["--namespace", ""], "namespace"),
    ],
)
def test_gangkeeper_manifests_bad_input_exits_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    ca = ensure_local(tmp_path, ["localhost"]).ca_cert
    junk = tmp_path / "junk.txt"
    junk.write_text("hello")
    argv = [{"CA": str(ca), "NOTPEM": str(junk)}.get(a, a) for a in argv]
    assert run_manifests(argv) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_backend_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        render_manifests(backend="yunikorn")


# --- the installation --------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_configmap_is_a_valid_config_for_the_backend(backend: str) -> None:
    data = one(render_manifests(backend=backend), "ConfigMap")["data"]["config.yaml"]
    assert load_config(yaml.safe_load(data)).backend == backend


@pytest.mark.parametrize(("kwargs", "names"), SHAPES)
def test_every_deployment_is_highly_available(
    kwargs: dict[str, Any], names: tuple[str, ...]
) -> None:
    objects = render_manifests(**kwargs)
    assert sorted(d["metadata"]["name"] for d in by_kind(objects, "Deployment")) == sorted(names)
    for name in names:
        deployment = named(objects, "Deployment", name)
        assert deployment["spec"]["replicas"] == 2
        (term,) = pod_template(objects, name)["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"]
        assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
        # Spread against its own kind of pod (and it selects them).
        assert selects(term["podAffinityTerm"]["labelSelector"]["matchLabels"],
                       pod_labels(objects, name))
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert selects(pdb["spec"]["selector"]["matchLabels"], pod_labels(objects, "gangkeeper"))


def test_admission_and_the_controller_run_in_separate_deployments_and_processes() -> None:
    from gangkeeper.webhook.cli import build_parser

    objects = render_manifests()
    (webhook,) = pod_template(objects, "gangkeeper")["containers"]
    (controller,) = pod_template(objects, "gangkeeper-controller")["containers"]
    webhook_args = build_parser().parse_args(webhook["args"])
    controller_args = build_parser().parse_args(controller["args"])
    assert webhook_args.no_controller and not webhook_args.controller_only
    assert controller_args.controller_only and not controller_args.no_controller
    # Same image and configuration, one process each.
    assert webhook["image"] == controller["image"]
    assert webhook_args.config == controller_args.config
    # Neither Deployment's selector picks the other's pods (a Deployment would fight
    # over them, and the webhook's selector cannot change on upgrade).
    for one_name, other in (("gangkeeper", "gangkeeper-controller"),
                            ("gangkeeper-controller", "gangkeeper")):
        selector = named(objects, "Deployment", one_name)["spec"]["selector"]["matchLabels"]
        assert selects(selector, pod_labels(objects, one_name))
        assert not selects(selector, pod_labels(objects, other))
    # Each has its own probes and resources.
    for container in (webhook, controller):
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])
        assert "memory" in container["resources"]["limits"]


@pytest.mark.parametrize(("kwargs", "names"), SHAPES)
def test_the_webhook_service_targets_only_the_admission_pods_port(
    kwargs: dict[str, Any], names: tuple[str, ...]
) -> None:
    objects = render_manifests(**kwargs)
    service = one(objects, "Service")
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443
    (container,) = pod_template(objects, "gangkeeper")["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[port["targetPort"]] == 8443
    assert "8443" in container["args"]
    assert not build_parser_args(container).controller_only, "the Service's pods admit"
    assert selects(service["spec"]["selector"], pod_labels(objects, "gangkeeper"))
    for name in names[1:]:
        assert not selects(service["spec"]["selector"], pod_labels(objects, name)), (
            "the API server must never call a controller-only process"
        )


@pytest.mark.parametrize(("kwargs", "names"), SHAPES)
def test_the_network_policy_covers_every_gangkeeper_pod(
    kwargs: dict[str, Any], names: tuple[str, ...]
) -> None:
    objects = render_manifests(**kwargs)
    selector = one(objects, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]
    for name in names:
        assert selects(selector, pod_labels(objects, name))


def test_the_single_process_mode_runs_admission_and_the_controller_in_one_process() -> None:
    objects = render_manifests(single_process=True)
    (container,) = pod_template(objects)["containers"]
    args = build_parser_args(container)
    assert not args.no_controller and not args.controller_only
    # Otherwise the same objects as the split installation, less the controller's.
    split = {(o["kind"], o["metadata"]["name"]): o for o in render_manifests()}
    single = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert set(split) - set(single) == {("Deployment", "gangkeeper-controller")}
    differ = {k for k in single if single[k] != split[k]}
    assert differ == {("Deployment", "gangkeeper")}


def test_gangkeeper_manifests_single_process_flag_renders_one_deployment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_manifests(["--single-process"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"] == ["gangkeeper"]


def build_parser_args(container: Manifest) -> argparse.Namespace:
    from gangkeeper.webhook.cli import build_parser

    return build_parser().parse_args(container["args"])


def test_probes_use_https_health_endpoints_and_resources_are_requested() -> None:
    objects = render_manifests()
    for name in ("gangkeeper", "gangkeeper-controller"):
        (container,) = pod_template(objects, name)["containers"]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            assert container[probe]["httpGet"]["scheme"] == "HTTPS"
        assert {"cpu", "memory"} <= set(container["resources"]["requests"])


@pytest.mark.parametrize("name", ["gangkeeper", "gangkeeper-controller"])
def test_the_pod_passes_pod_security_restricted(name: str) -> None:
    spec = pod_template(render_manifests(), name)
    pod_ctx = spec["securityContext"]
    assert pod_ctx["runAsNonRoot"] is True
    assert pod_ctx["seccompProfile"] == {"type": "RuntimeDefault"}
    for container in spec["containers"]:
        ctx = container["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"] == {"drop": ["ALL"]}
        assert ctx["readOnlyRootFilesystem"] is True
        assert isinstance(ctx["runAsUser"], int) and ctx["runAsUser"] > 0
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes["certs"], "self-managed certs go to an emptyDir"
    assert not any("hostPath" in v for v in spec["volumes"])


def test_every_rbac_rule_is_justified_and_none_is_a_wildcard() -> None:
    objects = render_manifests()
    for role in by_kind(objects, "ClusterRole") + by_kind(objects, "Role"):
        for rule in role["rules"]:
            assert rule_reason(rule), f"unjustified rule {rule}"
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], f"wildcard in {rule}"
    text = dump_yaml(objects)
    for role in by_kind(objects, "ClusterRole") + by_kind(objects, "Role"):
        for rule in role["rules"]:
            first_words = " ".join((rule_reason(rule) or "").split()[:4])
            assert f"# {first_words}" in text, "justification missing from the YAML"


@pytest.mark.parametrize(
    ("resource", "verbs"),
    [
        ("secrets", {"get", "update"}),
        ("mutatingwebhookconfigurations", {"get", "patch"}),
        ("validatingwebhookconfigurations", {"get", "patch"}),
    ],
)
def test_write_access_to_secrets_and_webhooks_is_limited_by_name(
    resource: str, verbs: set[str]
) -> None:
    objects = render_manifests()
    rules = [
        r
        for role in by_kind(objects, "ClusterRole") + by_kind(objects, "Role")
        for r in role["rules"]
        if resource in r["resources"]
    ]
    assert rules, resource
    for rule in rules:
        assert set(rule["verbs"]) == verbs
        assert rule["resourceNames"], f"{resource} access must name the objects"


def test_pods_are_patched_or_deleted_never_updated_and_created_only_for_placeholders() -> None:
    # delete: the watchdog's only write of its own (a member whose pinned node was
    # taken, for its owner to recreate; issue 12); get and create: placeholders.
    (cluster_role,) = by_kind(render_manifests(autoscaling=False), "ClusterRole")
    verbs = {v for r in cluster_role["rules"] if "pods" in r["resources"] for v in r["verbs"]}
    assert verbs == {"list", "watch", "patch", "delete"}
    (cluster_role,) = by_kind(render_manifests(), "ClusterRole")
    verbs = {v for r in cluster_role["rules"] if "pods" in r["resources"] for v in r["verbs"]}
    assert verbs == {"list", "watch", "patch", "delete", "get", "create"}


def test_cert_manager_mode_uses_a_certificate_and_ca_injection_instead_of_self_management() -> None:
    objects = render_manifests(cert_mode="cert-manager")
    certificates = {c["metadata"]["name"]: c["spec"] for c in by_kind(objects, "Certificate")}
    issuers = {i["metadata"]["name"]: i["spec"] for i in by_kind(objects, "Issuer")}
    certificate = one([c for c in by_kind(objects, "Certificate")
                       if c["metadata"]["name"] == "gangkeeper-serving"], "Certificate")
    assert certificate["spec"]["dnsNames"][-1] == "gangkeeper.gangkeeper-system.svc"
    # The serving certificate is signed by a CA of its own, not self-signed: its Secret's
    # ca.crt (the caBundle the injector writes) then survives its renewals.
    ca_issuer = issuers[certificate["spec"]["issuerRef"]["name"]]
    ca = certificates[
        next(n for n, c in certificates.items() if c["secretName"] == ca_issuer["ca"]["secretName"])
    ]
    assert ca["isCA"] is True
    assert "selfSigned" in issuers[ca["issuerRef"]["name"]]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(objects, kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == (
            "gangkeeper-system/gangkeeper-serving"
        )
    assert not by_kind(objects, "Secret")
    resources = {
        res for role in by_kind(objects, "Role") for r in role["rules"] for res in r["resources"]
    }
    assert "secrets" not in resources
    volumes = {v["name"]: v for v in pod_template(objects)["volumes"]}
    assert volumes["certs"]["secret"]["secretName"] == certificate["spec"]["secretName"]


def test_dumped_yaml_parses_back_to_the_same_objects() -> None:
    objects = render_manifests()
    assert [d for d in yaml.safe_load_all(dump_yaml(objects)) if d] == objects


@pytest.mark.parametrize("rule", RECOGNISER_RULES)
def test_every_recognised_workload_kind_can_be_listed_and_watched(rule: Any) -> None:
    (cluster_role,) = by_kind(render_manifests(), "ClusterRole")
    verbs = {
        verb
        for r in cluster_role["rules"]
        if rule.group in r["apiGroups"] and rule.resource in r["resources"]
        for verb in r["verbs"]
    }
    assert {"list", "watch"} <= verbs, f"{rule.group}/{rule.resource}: {sorted(verbs)}"


# --- Helm chart --------------------------------------------------------------------------
# What the templates make of these is checked with the real helm in tests/deploy/.

HELM = DEPLOY / "helm" / "gangkeeper"


def test_committed_helm_chart_data_is_what_the_renderer_writes() -> None:
    for name, text in helm_chart_files().items():
        assert (HELM / name).read_text() == text, (
            f"deploy/helm/gangkeeper/{name} is stale: run deploy/generate.sh"
        )


def test_the_charts_app_version_is_the_default_images_tag() -> None:
    chart = yaml.safe_load((HELM / "Chart.yaml").read_text())
    assert DEFAULT_IMAGE.rsplit(":", 1) == [
        yaml.safe_load((HELM / "values.yaml").read_text())["image"]["repository"],
        chart["appVersion"],
    ]


@pytest.mark.parametrize("name", ["gangkeeper", "gangkeeper-controller"])
@pytest.mark.parametrize("cert_mode", ["self", "cert-manager"])
def test_gangkeeper_serve_accepts_the_deployments_arguments(cert_mode: str, name: str) -> None:
    objects = render_manifests(cert_mode=cert_mode)  # type: ignore[arg-type]
    (container,) = pod_template(objects, name)["containers"]
    # The image's ENTRYPOINT is `gangkeeper`, so the args name the subcommand.
    assert container["args"][0] == "serve"
    args = build_parser_args(container)
    assert args.cert_mode == cert_mode  # one name in `manifests`, the Deployment and `serve`
    assert str(args.port) == "8443"


def test_placeholders_bring_their_priority_class_and_pod_rule_and_nothing_when_off() -> None:
    from gangkeeper.policies.names import PLACEHOLDER_PRIORITY, PLACEHOLDER_PRIORITY_CLASS
    from gangkeeper.webhook.install import render_manifests

    def pod_writes(objects: list[dict[str, Any]]) -> list[list[str]]:
        [role] = [o for o in objects if o["kind"] == "ClusterRole"]
        return [r["verbs"] for r in role["rules"] if r["resources"] == ["pods"] and
                "create" in r["verbs"]]

    on = render_manifests()
    [priority] = [o for o in on if o["kind"] == "PriorityClass"]
    assert priority["metadata"]["name"] == PLACEHOLDER_PRIORITY_CLASS
    # Below every workload (0), not below cluster-autoscaler's expendable cutoff (-10).
    assert -10 <= priority["value"] == PLACEHOLDER_PRIORITY < 0
    assert priority["preemptionPolicy"] == "Never"
    assert pod_writes(on) == [["get", "create", "delete"]]
    off = render_manifests(autoscaling=False)
    assert not [o for o in off if o["kind"] == "PriorityClass"]
    assert pod_writes(off) == []
    [config] = [o for o in off if o["kind"] == "ConfigMap"]
    assert "autoscaling: 'off'" in config["data"]["config.yaml"]


def test_provisioning_requests_add_their_rules_and_mode_beside_the_placeholders() -> None:
    def rules(objects: list[dict[str, Any]]) -> list[list[str]]:
        [role] = [o for o in objects if o["kind"] == "ClusterRole"]
        return [r["resources"] for r in role["rules"]
                if r["resources"] in (["podtemplates"], ["provisioningrequests"])]

    asking = render_manifests(provisioning_requests=True)
    assert rules(asking) == [["podtemplates"], ["provisioningrequests"]]
    assert [o for o in asking if o["kind"] == "PriorityClass"]  # placeholders stand in
    [config] = [o for o in asking if o["kind"] == "ConfigMap"]
    assert "autoscaling: provisioningrequest" in config["data"]["config.yaml"]
    assert rules(render_manifests()) == []
    assert rules(render_manifests(autoscaling=False, provisioning_requests=True)) == []
