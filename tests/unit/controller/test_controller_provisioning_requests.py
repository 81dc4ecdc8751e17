"""Gangs that ask cluster-autoscaler through ProvisioningRequests: which request, what its
conditions mean (as Kueue's provisioning admission check reads them), when to ask
again, when to give up, and what the members carry when they are released."""

from __future__ import annotations

from typing import Any

import pytest
from builders.gangs import T0, members, node
from builders.provisioning import BEST_EFFORT, OWNER, condition, provisioning_request

from gangkeeper.policies.autoscaling.provisioning import (
    outcome,
    request_info,
    request_name,
    template_info,
    template_orphans,
)
from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.errors import InvalidConfig
from gangkeeper.policies.names import (
    CONSUME_PROVISIONING_REQUEST_ANNOTATION,
    GATE,
    PROVISIONING_CLASS_ANNOTATION,
    PROVISIONING_LABEL,
    PROVISIONING_REQUEST_LABEL,
)
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.request_actions import refusal_key, request_actions
from gangkeeper.policies.release.results import GangReport, Plan
from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.controller.writes import ungate_patch

NOW = T0 + 60
POOL = {"gangkeeper-pool": "a"}
CONFIG: dict[str, Any] = {
    "pools": [{"name": "a", "maxCount": 8, "labels": POOL, "allocatable": {"nvidia.com/gpu": 8}}],
    "autoscaling": "provisioningrequest",
    "provisioningRetrySeconds": 60,
}
#: A Failed/BookingExpired request is retried this long (attempt 1) after its condition.
FIRST_WAIT = 60


def gang(label: str = "llama", count: int = 4, **kwargs: Any) -> list[dict[str, Any]]:
    return members(label, count, gpus=8, selector=POOL, owner=OWNER, **kwargs)


def decide(
    pods: list[dict[str, Any]],
    requests: list[dict[str, Any]] | None,
    config: Config | None = None,
    nodes: list[dict[str, Any]] | None = None,
    now: float = NOW,
) -> Plan:
    config = config or load_config(CONFIG)
    infos = None if requests is None else [i for r in requests if (i := request_info(r))]
    live = [pod_info(p, config) for p in pods if is_live(p)]
    return plan(live, nodes or [], config, now, requests=infos)


def report(result: Plan, label: str = "llama") -> GangReport:
    return next(r for r in result.reports if r.label == label)


# --- asking ---------------------------------------------------------------------------


def test_a_gang_on_a_pool_at_zero_asks_with_one_request_and_no_placeholders() -> None:
    result = decide(gang(), [])
    [ask] = result.request_asks
    assert (ask.name, ask.class_name) == ("llama-gkpr-1", BEST_EFFORT)
    [pod_set] = ask.create  # four members of one shape: one PodTemplate, count 4
    assert (pod_set.template, pod_set.count) == ("llama-gkpr-1-0", 4)
    assert result.asks == () and result.releases == ()
    r = report(result)
    assert (r.state, r.code) == ("waiting", "provisioning")
    assert "ProvisioningRequest llama-gkpr-1, attempt 1" in r.reason


def test_where_the_api_is_not_served_placeholders_stand_in() -> None:
    result = decide(gang(), None)
    assert result.request_asks == ()
    [ask] = result.asks
    assert len(ask.create) == 4


def test_members_of_two_shapes_get_two_pod_templates() -> None:
    pods = [*gang(count=2), *members("llama", 2, gpus=4, selector=POOL, owner=OWNER,
                                     created=T0 + 5)]
    for index, raw in enumerate(pods):
        raw["metadata"]["name"] = f"llama-{index}"
        raw["metadata"]["uid"] = f"uid-{index}"
        raw["metadata"]["annotations"]["gangkeeper.io/min-member"] = "4"
    [ask] = decide(pods, []).request_asks
    assert [(s.template, s.count, s.member.demand["nvidia.com/gpu"]) for s in ask.create] == [
        ("llama-gkpr-1-0", 2, 8), ("llama-gkpr-1-1", 2, 4)]


def test_the_configured_class_is_asked_for() -> None:
    config = load_config({**CONFIG, "provisioningRequest": {
        "className": "check-capacity.autoscaling.x-k8s.io"}})
    [ask] = decide(gang(), [], config).request_asks
    assert ask.class_name == "check-capacity.autoscaling.x-k8s.io"


def test_a_pending_request_is_kept_and_nothing_is_created_again() -> None:
    pending = provisioning_request("llama", conditions=[
        condition("Accepted", at=T0 + 5), condition("Provisioned", "False", at=T0 + 5,
                                                     message="waiting for 4 nodes")])
    result = decide(gang(), [pending])
    [ask] = result.request_asks
    assert (ask.name, ask.create, ask.delete, ask.event) == ("llama-gkpr-1", (), (), ("", ""))
    assert result.request_orphans == ()
    assert "not provisioned yet: Provisioned (ProvisionedReason): waiting for 4 nodes" in (
        report(result).reason)


# --- Provisioned ------------------------------------------------------------------------


def test_provisioned_releases_the_whole_gang_annotated_unpinned_before_its_nodes_are_seen() -> None:
    done = provisioning_request("llama", conditions=[condition("Provisioned", at=T0 + 30)])
    result = decide(gang(), [done])
    [release] = result.releases
    assert len(release.pods) == 4 and release.pins == {}
    assert release.annotations == {
        CONSUME_PROVISIONING_REQUEST_ANNOTATION: "llama-gkpr-1",
        PROVISIONING_CLASS_ANNOTATION: BEST_EFFORT,
    }
    assert "llama-gkpr-1 is provisioned" in release.unpinned
    assert result.request_orphans == ()  # the booking is the members' now


def test_provisioned_with_its_nodes_in_the_cache_releases_pinned_and_annotated() -> None:
    done = provisioning_request("llama", conditions=[condition("Provisioned", at=T0 + 30)])
    nodes = [node(f"n{i}", 8, labels=POOL) for i in range(4)]
    [release] = decide(gang(), [done], nodes=nodes).releases
    assert len(release.pins) == 4 and release.unpinned == ""
    assert release.annotations[CONSUME_PROVISIONING_REQUEST_ANNOTATION] == "llama-gkpr-1"


def test_the_request_of_a_released_gang_stays_while_its_members_live() -> None:
    done = provisioning_request("llama", conditions=[condition("Provisioned", at=T0 + 30)])
    result = decide(gang(gates=()), [done])
    assert result.releases == () and result.request_orphans == ()


def test_the_release_patch_adds_both_annotations_inside_the_guarded_gate_patch() -> None:
    member = pod_info(gang()[0], load_config(CONFIG))
    keys = {CONSUME_PROVISIONING_REQUEST_ANNOTATION: "llama-gkpr-1",
            PROVISIONING_CLASS_ANNOTATION: BEST_EFFORT}
    for pinned_to in (None, "n1"):
        patch = ungate_patch(member, pinned_to, NOW, keys)
        assert patch[0] == {"op": "test", "path": "/spec/schedulingGates",
                            "value": [{"name": GATE}]}
        added = {op["path"]: op["value"] for op in patch if op["op"] == "add"}
        assert added["/metadata/annotations/autoscaling.x-k8s.io~1consume-provisioning-request"] \
            == "llama-gkpr-1"
        assert added["/metadata/annotations/autoscaling.x-k8s.io~1provisioning-class-name"] \
            == BEST_EFFORT
        assert patch[-1] == {"op": "replace", "path": "/spec/schedulingGates", "value": []}
    assert ungate_patch(member) == ungate_patch(member, None, None, {})


# --- Failed, BookingExpired: retry with backoff, then give up ---------------------------


@pytest.mark.parametrize("kind", ["Failed", "BookingExpired"])
def test_a_failed_or_expired_request_waits_its_backoff_then_asks_with_the_next_attempt(
    kind: str,
) -> None:
    failed = provisioning_request("llama", conditions=[condition(kind, at=T0 + 30,
                                                                 message="out of stock")])
    early = decide(gang(), [failed], now=T0 + 30 + FIRST_WAIT - 1)
    [ask] = early.request_asks
    assert ask.create == () and ask.delete == ()
    assert ask.event[0] == "GangProvisioningFailed" and "out of stock" in ask.event[1]
    assert ask.about == failed["metadata"]["uid"]
    assert "asking again with attempt 2 in 1s" in report(early).reason
    due = decide(gang(), [failed], now=T0 + 30 + FIRST_WAIT)
    [ask] = due.request_asks
    assert ask.name == "llama-gkpr-2" and [p.template for p in ask.create] == ["llama-gkpr-2-0"]
    assert [r.name for r in ask.delete] == ["llama-gkpr-1"]


def test_the_backoff_doubles_per_attempt_from_the_conditions_time() -> None:
    failed = provisioning_request("llama", 3, conditions=[condition("Failed", at=T0)])
    assert outcome(request_info(failed), load_config(CONFIG).autoscaling).retry_at == (  # type: ignore[arg-type]
        T0 + 4 * FIRST_WAIT)


def test_after_the_retry_limit_the_gang_gives_up_with_an_event_and_claims_no_pool() -> None:
    config = load_config({**CONFIG, "provisioningRequest": {"retryLimit": 2}})
    last = provisioning_request("llama", 3, conditions=[condition("Failed", at=T0)])
    later = gang("later", created=T0 + 20)
    result = decide([*gang(), *later], [last], config, now=T0 + 10_000)
    gave_up = next(a for a in result.request_asks if a.gang.label == "llama")
    assert gave_up.create == () and gave_up.delete == ()
    assert gave_up.event[0] == "GangProvisioningGaveUp"
    assert "3 of 3 attempts failed" in gave_up.event[1]
    assert result.request_orphans == ()  # kept as the record: a restart gives up too
    assert report(result).code == "no-fit"
    # The pool is not held for a gang that stopped asking: the next gang asks.
    asked = next(a for a in result.request_asks if a.gang.label == "later")
    assert asked.name == "later-gkpr-1"


def test_capacity_revoked_gives_up_with_an_event() -> None:
    revoked = provisioning_request("llama", conditions=[
        condition("Provisioned", at=T0), condition("CapacityRevoked", at=T0 + 5)])
    result = decide(gang(), [revoked])
    [ask] = result.request_asks
    assert ask.event[0] == "GangProvisioningRevoked" and ask.create == ()
    assert result.releases == ()


# --- what is deleted ------------------------------------------------------------------


def test_requests_of_a_gang_that_is_gone_or_of_another_owner_are_orphans() -> None:
    gone = provisioning_request("gone")
    stale = provisioning_request("llama", owner_uid="an-earlier-job")
    result = decide(gang(), [gone, stale])
    assert sorted(r.name for r in result.request_orphans) == ["gone-gkpr-1", "llama-gkpr-1"]
    [ask] = result.request_asks
    assert ask.create  # the earlier job's request is not this gang's


def test_a_pending_request_of_a_gang_that_fits_now_is_deleted_with_its_release() -> None:
    pending = provisioning_request("llama")
    nodes = [node(f"n{i}", 8, labels=POOL) for i in range(4)]
    result = decide(gang(), [pending], nodes=nodes)
    [release] = result.releases
    assert release.annotations == {}
    assert [r.name for r in result.request_orphans] == ["llama-gkpr-1"]


def test_pod_templates_of_no_live_request_are_orphans() -> None:
    def template(name: str, request: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                             "labels": {PROVISIONING_LABEL: "llama",
                                        PROVISIONING_REQUEST_LABEL: request}}}

    live = request_info(provisioning_request("llama", 2))
    assert live is not None
    templates = [template_info(template(n, r)) for n, r in (
        ("llama-gkpr-1-0", "llama-gkpr-1"), ("llama-gkpr-2-0", "llama-gkpr-2"),
        ("llama-gkpr-3-0", "llama-gkpr-3"))]
    found = template_orphans([t for t in templates if t], [live], set(),
                             {("team", "llama-gkpr-3")})
    assert [t.name for t in found] == ["llama-gkpr-1-0"]
    assert template_info({"metadata": {"name": "theirs", "labels": {}}}) is None


# --- names and settings ------------------------------------------------------------------


def test_names_are_deterministic_per_gang_and_attempt_and_fit_the_api() -> None:
    assert request_name("llama", 3) == "llama-gkpr-3"
    long = "x" * 300
    assert request_name(long, 1) == request_name(long, 1)
    assert len(request_name(long, 12)) <= 253 and request_name(long, 12).endswith("-gkpr-12")
    info = request_info(provisioning_request("llama", 7))
    assert info is not None and info.attempt == 7
    assert request_info({"metadata": {"name": "not-ours", "labels": {}}}) is None


def test_the_settings_name_the_bad_key() -> None:
    settings = load_config(CONFIG).autoscaling
    assert (settings.provisioning_class, settings.retry_limit) == (BEST_EFFORT, 3)
    assert settings.uses_requests
    assert not load_config({}).autoscaling.uses_requests
    assert load_config({"namespaceAutoscaling": {"t": "provisioningrequest"}}).autoscaling \
        .uses_requests
    for bad, key in (({"retryLimit": -1}, "provisioningRequest.retryLimit"),
                     ({"className": ""}, "provisioningRequest.className"),
                     ({"class": "x"}, "provisioningRequest.class")):
        with pytest.raises(InvalidConfig, match=key.replace(".", r"\.")):
            load_config({"provisioningRequest": bad})


def test_an_unquoted_off_in_yaml_means_off() -> None:
    import yaml

    loaded = load_config(yaml.safe_load("autoscaling: off\nnamespaceAutoscaling: {lab: off}\n"))
    assert (loaded.autoscaling.mode, dict(loaded.autoscaling.namespace_modes)) == (
        "off", {"lab": "off"})


def test_ungate_releases_a_provisioned_gang_onto_its_booking_as_the_controller_would() -> None:
    """With the controller scaled to zero, `gangkeeper ungate` (given the requests it
    lists) releases the provisioned gang with the consume annotations, so
    cluster-autoscaler counts the pods against the booking. Before, it never read the
    requests: the gang went without them where its nodes were seen, and stayed gated
    where they were not yet (the controller releases it onto the booking then)."""
    from gangkeeper.policies.release.ungate import ungate_plan

    done = provisioning_request("llama", conditions=[condition("Provisioned", at=T0 + 30)])
    nodes = [node(f"n{i}", 8, labels=POOL) for i in range(4)]
    config = load_config(CONFIG)
    decided = ungate_plan(gang(), nodes, config, NOW, requests=[done])
    [release] = decided.releases
    assert release.annotations[CONSUME_PROVISIONING_REQUEST_ANNOTATION] == "llama-gkpr-1"
    assert len(release.pins) == 4
    assert ungate_plan(gang(), [], config, NOW, requests=[done]).releases[0].annotations
    assert ungate_plan(gang(), [], config, NOW).releases == ()


# --- the Events' memory -----------------------------------------------------------------


def test_an_event_is_said_once_while_its_gang_asks_and_forgotten_when_the_gang_is_gone() -> None:
    revoked = provisioning_request("llama", conditions=[
        condition("Provisioned", at=T0), condition("CapacityRevoked", at=T0 + 5)])
    requests = [i for r in [revoked] if (i := request_info(r))]
    first = request_actions(decide(gang(), [revoked]), requests, [], frozenset())
    assert [e.reason for e in first.events] == ["GangProvisioningRevoked"]
    refused = (refusal_key(decide(gang(), [revoked]).request_asks[0].gang, "quota"),
               "GangProvisioningRefused")
    again = request_actions(decide(gang(), [revoked]), requests, [],
                            first.reported | {refused})
    assert again.events == ()  # the same request, the same reason: said already
    assert refused in again.reported  # the gang still asks: its refusal is remembered
    # The Job and its request are gone: nothing of it is kept (the memory would
    # otherwise grow by every gang that ever asked).
    assert request_actions(decide([], []), [], [], again.reported).reported == frozenset()
