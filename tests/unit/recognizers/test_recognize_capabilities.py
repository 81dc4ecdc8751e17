"""Every registered workload kind is complete, and what a kind declares reaches every table
(recognizers/base.py capabilities, recognizers/capabilities.py).

A kind is one module (`policies/recognizers/<module>.py`), one registry line, its tests
(`tests/unit/recognizers/test_recognize_<module>.py`) and an example manifest under
examples/. Its webhook rule, RBAC, watches, requeue and the pod webhooks' match
condition all follow from what its recogniser declares. deploy/base is read as
`kubectl apply -k deploy/` installs it (tests/unit/install/test_manifests.py holds it to the
renderer's output).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from builders.workloads import Lookup

from gangkeeper.policies.model import Gang, KubeObject, OwnerLookup, PodMembership
from gangkeeper.policies.recognizers.base import (
    FollowsOwners,
    MarksPods,
    OwnerResource,
    Recognizer,
    Registry,
    RequeuesGangs,
    Requeuing,
    ResourceRule,
)
from gangkeeper.policies.recognizers.capabilities import (
    followed_owners,
    pod_label_prefixes,
    recreating_kinds,
    requeued,
    suspended_owners,
)
from gangkeeper.policies.recognizers.registry import default_registry
from gangkeeper.policies.release.recovery import SUSPENDED_OWNERS
from gangkeeper.policies.release.watchdog import RECREATING_OWNERS
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.install import kinds as install_kinds
from gangkeeper.webhook.install import render_manifests, rule_reason
from gangkeeper.webhook.server import cluster_view
from gangkeeper.webhook.server.cluster_view import owner_resources

CONFIG = Config()
ROOT = Path(__file__).resolve().parents[3]
TESTS = Path(__file__).resolve().parent
EXAMPLES = ROOT / "examples"
BASE = ROOT / "deploy" / "base"

KINDS = [pytest.param(r, id=r.name) for r in default_registry()]


def _documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _installed(name: str) -> list[Any]:
    return _documents(BASE / name)


def _cluster_rules(objects: list[Any]) -> list[dict[str, Any]]:
    (role,) = [o for o in objects if o["kind"] == "ClusterRole"]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def _verbs(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    return {
        verb
        for r in rules
        if group in r["apiGroups"] and resource in r["resources"]
        for verb in r["verbs"]
    }


def _reasons(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> set[str]:
    return {
        str(rule_reason(r))
        for r in rules
        if group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
    }


def _hooks(objects: list[Any]) -> dict[str, Any]:
    return {
        h["name"]: h
        for o in objects
        if o["kind"].endswith("WebhookConfiguration")
        for h in o["webhooks"]
    }


def _pod_condition(objects: list[Any]) -> str:
    hook = _hooks(objects)["pods.mutate.gangkeeper.io"]
    (condition,) = [c for c in hook["matchConditions"] if c["name"] == "gpu-or-training-pod"]
    expression: str = condition["expression"]
    return expression


def _validated(objects: list[Any], rule: ResourceRule) -> bool:
    return any(
        rule.group in r["apiGroups"]
        and rule.resource in r["resources"]
        and set(rule.versions) <= set(r["apiVersions"])
        and {"CREATE", "UPDATE"} <= set(r["operations"])
        for r in _hooks(objects)["workloads.validate.gangkeeper.io"]["rules"]
    )


def _module(recognizer: Recognizer) -> str:
    return type(recognizer).__module__.rpartition(".")[2]


# --- every registered kind is complete ---------------------------------------------------


@pytest.mark.parametrize("recognizer", KINDS)
def test_every_kind_has_its_test_file_naming_its_kinds(recognizer: Recognizer) -> None:
    path = TESTS / f"test_recognize_{_module(recognizer)}.py"
    assert path.is_file(), f"{recognizer.name}: no {path.relative_to(ROOT)}"
    text = path.read_text()
    missing = [rule.kind for rule in recognizer.rules if rule.kind not in text]
    assert missing == [], f"{path.name} never names {missing}"


def _claims(recognizer: Recognizer, doc: Any, lookup: Lookup) -> bool:
    if doc.get("kind") == "Pod":
        return recognizer.recognize_pod(doc, lookup, CONFIG) is not None
    return bool(recognizer.recognize_object(doc, lookup, CONFIG))


@pytest.mark.parametrize("recognizer", KINDS)
def test_every_kind_has_an_example_it_makes_a_gang_of(recognizer: Recognizer) -> None:
    found = []
    for path in sorted(EXAMPLES.glob("*-*.yaml")):
        docs = _documents(path)
        lookup = Lookup(*docs)
        if any(_claims(recognizer, doc, lookup) for doc in docs):
            found.append(path.name)
    assert found, f"{recognizer.name}: no example under examples/ is a gang of it"


@pytest.mark.parametrize("recognizer", KINDS)
def test_every_kind_is_validated_watched_and_readable_as_installed(
    recognizer: Recognizer,
) -> None:
    hooks, rules = _installed("webhooks.yaml"), _cluster_rules(_installed("rbac.yaml"))
    watched = {(r.group, r.version, r.plural, r.kind) for r in owner_resources()}
    for rule in recognizer.rules:
        assert _validated(hooks, rule), f"no webhook rule for {rule.group}/{rule.resource}"
        assert {"get", "list", "watch"} <= _verbs(rules, rule.group, rule.resource)
        for version in rule.versions:
            assert (rule.group, version, rule.resource, rule.kind) in watched


@pytest.mark.parametrize("recognizer", KINDS)
def test_the_owners_a_kind_follows_are_watched_and_readable_for_its_reason(
    recognizer: Recognizer,
) -> None:
    if not isinstance(recognizer, FollowsOwners):
        pytest.skip("follows no other owner")
    own = {(r.group, r.resource) for rec in default_registry() for r in rec.rules}
    rules = _cluster_rules(_installed("rbac.yaml"))
    watched = {(r.group, r.version, r.plural, r.kind, r.namespaced) for r in owner_resources()}
    for owner in recognizer.follows:
        assert (owner.group, owner.resource) not in own, "a registered kind is watched anyway"
        assert owner.why
        key = (owner.group, owner.version, owner.resource, owner.kind, owner.namespaced)
        assert key in watched
        assert {"get", "list", "watch"} <= _verbs(rules, owner.group, owner.resource)
        assert _reasons(rules, owner.group, owner.resource, "watch") == {f"webhook: {owner.why}"}


@pytest.mark.parametrize("recognizer", KINDS)
def test_the_labels_a_kind_puts_on_pods_let_them_through_the_pod_webhooks(
    recognizer: Recognizer,
) -> None:
    if not isinstance(recognizer, MarksPods):
        pytest.skip("marks no pod")
    assert recognizer.pod_label_prefixes
    condition = _pod_condition(_installed("webhooks.yaml"))
    for prefix in recognizer.pod_label_prefixes:
        assert f"k.startsWith('{prefix}')" in condition


@pytest.mark.parametrize("recognizer", KINDS)
def test_how_a_kind_is_requeued_is_what_the_watchdog_and_recovery_do(
    recognizer: Recognizer,
) -> None:
    kinds = {rule.kind for rule in recognizer.rules}
    if not isinstance(recognizer, RequeuesGangs):
        assert not kinds & RECREATING_OWNERS, "requeued though it declares no way"
        return
    how = recognizer.requeue.how
    assert recognizer.rules, "a kind that owns no gang cannot requeue one"
    assert kinds <= RECREATING_OWNERS
    rules = _cluster_rules(_installed("rbac.yaml"))
    for rule in recognizer.rules:
        keys = {(f"{rule.group}/{v}" if rule.group else v, rule.kind) for v in rule.versions}
        if how == "suspend":
            assert recognizer.requeue.why
            assert {SUSPENDED_OWNERS.get(k) for k in keys} == {rule.resource}
            assert "patch" in _verbs(rules, rule.group, rule.resource)
            reason = _reasons(rules, rule.group, rule.resource, "patch")
            assert reason == {f"controller: {recognizer.requeue.why}"}
        else:
            assert how == "recreate"
            assert not keys & set(SUSPENDED_OWNERS)


# --- a new kind, declared once, reaches every table ---------------------------------------

WIDGET = ResourceRule("example.com", ("v1",), "widgets", "Widget")
GADGETS = OwnerResource("example.com", "v1", "gadgets", "Gadget", "gadgets size widgets")


class WidgetRecognizer:
    """A kind gangkeeper does not ship, declaring every optional capability."""

    name = "widget"
    rules = (WIDGET,)
    follows = (GADGETS,)
    pod_label_prefixes = ("widgets.example.com/",)

    def __init__(self, how: str = "suspend") -> None:
        self.requeue = (
            Requeuing("recreate") if how == "recreate"
            else Requeuing("suspend", "requeue a Widget by pausing it")
        )

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        return None

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        return None


def _with(extra: Recognizer) -> Registry:
    registry = Registry()
    for recognizer in (*default_registry(), extra):
        registry.register(recognizer)
    return registry


def test_a_new_kinds_declarations_are_in_the_derived_tables() -> None:
    registry = _with(WidgetRecognizer())
    assert GADGETS in followed_owners(registry)
    assert "widgets.example.com/" in pod_label_prefixes(registry)
    assert suspended_owners(registry)[("example.com/v1", "Widget")] == "widgets"
    assert "Widget" in recreating_kinds(registry)
    assert "Widget" not in recreating_kinds(default_registry())
    recreated = _with(WidgetRecognizer("recreate"))
    assert ("example.com/v1", "Widget") not in suspended_owners(recreated)
    assert "Widget" in recreating_kinds(recreated)
    assert [r.kind for r, _ in requeued(recreated, "recreate")].count("Widget") == 1


def test_the_derived_tables_of_the_shipped_kinds() -> None:
    registry = default_registry()
    assert dict(suspended_owners(registry)) == {
        ("batch/v1", "Job"): "jobs",
        ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobsets",
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "trainjobs",
        ("ray.io/v1", "RayCluster"): "rayclusters",
    }
    assert recreating_kinds(registry) == {
        "Job", "JobSet", "TrainJob", "LeaderWorkerSet", "PyTorchJob", "TFJob", "MPIJob",
        "XGBoostJob", "PaddleJob", "JAXJob", "RayCluster", "RayJob", "RayService",
    }  # fmt: skip
    assert [(o.group, o.resource, o.namespaced) for o in followed_owners(registry)] == [
        ("apps", "statefulsets", True),
        ("trainer.kubeflow.org", "trainingruntimes", True),
        ("trainer.kubeflow.org", "clustertrainingruntimes", False),
    ]


def test_a_new_kind_gets_its_webhook_rule_rbac_watch_and_pod_condition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = _with(WidgetRecognizer())
    monkeypatch.setattr(install_kinds, "default_registry", lambda: registry)
    monkeypatch.setattr(cluster_view, "default_registry", lambda: registry)
    objects = render_manifests()
    rules = _cluster_rules(objects)
    assert _validated(objects, WIDGET)
    assert _verbs(rules, "example.com", "widgets") == {"get", "list", "watch", "patch"}
    assert _verbs(rules, "example.com", "gadgets") == {"get", "list", "watch"}
    assert _reasons(rules, "example.com", "widgets", "patch") == {
        "controller: requeue a Widget by pausing it"
    }
    assert "k.startsWith('widgets.example.com/')" in _pod_condition(objects)
    watched = {(r.group, r.plural) for r in owner_resources()}
    assert {("example.com", "widgets"), ("example.com", "gadgets")} <= watched
    # What the shipped kinds render is untouched by the new one.
    shipped = [r for r in rules if "example.com" not in r["apiGroups"]]
    monkeypatch.undo()
    assert shipped == _cluster_rules(render_manifests())
