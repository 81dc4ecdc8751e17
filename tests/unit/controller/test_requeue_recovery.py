"""Bringing a released gang back to all-or-nothing (issue 12): what is recreated
(`rebindScope`, `podsReadyRequeue`) and how — a Job, JobSet or TrainJob suspended and
resumed, so no pod counts against a backoffLimit; another owner's pods deleted; bare
pods reported — with the requeues bounded per gang, on the in-memory API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from builders.gangs import JOB, JOBSET, LWS, T0, TRAINJOB, node, owner_object, pod, released

from gangkeeper.policies.catalogue import Metric
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.names import (
    REQUEUE_LABEL,
    REQUEUES_ANNOTATION,
)
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.results import Plan
from gangkeeper.policies.release.watchdog_actions import RESUME_AFTER_SECONDS
from gangkeeper.policies.settings.config import Config, load_config
from gangkeeper.webhook.controller.watchdog import Watchdog
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.resources import PODS

JOBS = "/apis/batch/v1/jobs"
JOB_PATH = "/apis/batch/v1/namespaces/team/jobs/train"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/jobsets"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/trainjobs"
LATER = T0 + 61


def config(**keys: Any) -> Config:
    return load_config({"rebindSeconds": 30, "podsReadyTimeoutSeconds": 120, **keys})


def taken_node() -> dict[str, Any]:
    """A pod of no gang bound on n1, where member g-1 is pinned."""
    return pod("thief", 4, node_name="n1", phase="Running")


def planned(pods: list[dict[str, Any]], nodes: int, cfg: Config, now: float = LATER) -> Plan:
    fleet = [node(f"n{i}", 4) for i in range(nodes)]
    return plan([pod_info(p, cfg) for p in pods], fleet, cfg, now)


def requeue_of(pods: list[dict[str, Any]], nodes: int, cfg: Config) -> Any:
    (requeue,) = planned(pods, nodes, cfg).requeues
    return requeue


# --- what is recreated, and how (pure) ------------------------------------------------


def test_a_jobs_gang_is_requeued_whole_by_suspending_the_job() -> None:
    requeue = requeue_of([*released(2, bound=1, owner=JOB), taken_node()], 3, config())
    assert (requeue.how, requeue.whole, requeue.delete) == ("suspend", True, ())
    assert [m.name for m in requeue.about] == ["g-1"]


def test_stuck_members_with_room_beside_the_others_are_recreated_alone() -> None:
    # n2 is free: the stuck member, recreated, has a node.
    requeue = requeue_of([*released(2, bound=1, owner=LWS), taken_node()], 3, config())
    assert (requeue.how, requeue.whole) == ("delete", False)
    assert [m.name for m in requeue.delete] == ["g-1"]


def test_stuck_members_without_room_beside_the_others_take_the_whole_gang_back() -> None:
    # n0 holds g-0, n1 the pod of no gang: g-1 recreated would find no node; only the
    # whole gang, placed anew, can be all-or-nothing again.
    requeue = requeue_of([*released(2, bound=1, owner=LWS), taken_node()], 2, config())
    assert (requeue.how, requeue.whole) == ("delete", True)
    assert sorted(m.name for m in requeue.delete) == ["g-0", "g-1"]
    assert "no room beside the members bound" in requeue.why_whole


@pytest.mark.parametrize(("scope", "nodes", "whole"), [
    ("members", 2, False), ("gang", 3, True), ("auto", 3, False), ("auto", 2, True),
])
def test_rebind_scope_says_what_is_recreated(scope: str, nodes: int, whole: bool) -> None:
    pods = [*released(2, bound=1, owner=LWS), taken_node()]
    requeue = requeue_of(pods, nodes, config(rebindScope=scope))
    assert requeue.whole is whole
    assert len(requeue.delete) == (2 if whole else 1)


@pytest.mark.parametrize("owner", [JOBSET, TRAINJOB], ids=["JobSet", "TrainJob"])
def test_a_jobset_or_trainjob_gang_is_requeued_whole_by_suspension_even_with_room(
    owner: dict[str, str],
) -> None:
    # n2 is free: deleting the stuck member alone would do for an owner without
    # `spec.suspend`, but a deleted pod counts against its child Job's backoffLimit.
    for scope in ("auto", "members"):
        pods = [*released(2, bound=1, owner=owner), taken_node()]
        requeue = requeue_of(pods, 3, config(rebindScope=scope))
        assert (requeue.how, requeue.whole, requeue.delete) == ("suspend", True, ())
        assert f"a {owner['kind']} is requeued whole" in requeue.why_whole


def test_bare_pods_are_only_reported() -> None:
    requeue = requeue_of([*released(2, bound=1), taken_node()], 3, config())
    assert (requeue.how, requeue.delete) == ("report", ())


def test_a_gang_never_ready_is_requeued_only_when_asked() -> None:
    pods = released(2, bound=2, owner=JOB)
    assert planned(pods, 2, config(), T0 + 121).requeues == ()
    (requeue,) = planned(pods, 2, config(podsReadyRequeue=True), T0 + 121).requeues
    assert (requeue.cause, requeue.how, requeue.whole) == ("not-ready", "suspend", True)
    assert planned(pods, 2, config(podsReadyRequeue=True), T0 + 100).requeues == ()
    ready = released(2, bound=2, owner=JOB, ready=True)
    assert planned(ready, 2, config(podsReadyRequeue=True), T0 + 999).requeues == ()
    # Bare pods: nothing would recreate them; the GangNotReady Event says it.
    assert planned(released(2, bound=2), 2, config(podsReadyRequeue=True), T0 + 121).requeues == ()


def test_the_plan_says_how_the_gang_is_brought_back() -> None:
    report = planned([*released(2, bound=1, owner=JOB), taken_node()], 3, config()).reports[0]
    assert "its Job is suspended and resumed" in report.reason
    report = planned([*released(2, bound=1, owner=LWS), taken_node()], 2, config()).reports[0]
    assert "the whole gang is deleted for the owner to recreate" in report.reason


# --- the watchdog acts on the in-memory API -------------------------------------------------


class Posted:
    """A GangEvents stand-in keeping (reason, member names, note)."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, list[str], str]] = []

    def send(self, event: Any) -> None:
        self.posts.append(
            (event.reason, [t["name"] for t in event.regarding if t["kind"] == "Pod"],
             event.note))

    def reasons(self) -> list[str]:
        return [reason for reason, _, _ in self.posts]


def job(*, backoff_limit: int = 0, requeues: int | None = None,
        labels: dict[str, str] | None = None, suspend: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "namespace": "team", "uid": "job-uid"}
    if labels:
        meta["labels"] = labels
    if requeues is not None:
        meta["annotations"] = {REQUEUES_ANNOTATION: str(requeues)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"backoffLimit": backoff_limit, "suspend": suspend}}


def watchdog(api: FakeApi, cfg: Config) -> tuple[Watchdog, Posted, dict[str, float]]:
    posted, counts = Posted(), {}

    def count(family: Metric, labels: tuple[tuple[str, str], ...] = (), value: float = 1.0) -> None:
        key = family.name + json.dumps(labels)
        counts[key] = counts.get(key, 0.0) + value

    return Watchdog(api, cfg, posted, count), posted, counts  # type: ignore[arg-type]


def pass_(dog: Watchdog, pods: list[dict[str, Any]], nodes: int, cfg: Config,
          now: float = LATER) -> None:
    # As the controller reads them: the API's copy where it holds one (its
    # resourceVersion, which the watchdog's deletes of unbound members are checked on).
    stored = dog.rest.objects[PODS.path]  # type: ignore[attr-defined]
    pods = [stored.get(f"{p['metadata']['namespace']}/{p['metadata']['name']}", p) for p in pods]
    actions = dog.actions(planned(pods, nodes, cfg, now), now, [pod_info(p, cfg) for p in pods])
    dog.send(actions, now)


def methods(api: FakeApi, method: str, path: str = JOB_PATH) -> int:
    return sum(1 for m, p, _ in api.calls if m == method and p == path)


def object_path(collection: str, name: str) -> str:
    """/apis/G/V/PLURAL and a name: the object's path in namespace team."""
    prefix, plural = collection.rsplit("/", 1)
    return f"{prefix}/namespaces/team/{plural}/{name}"


@pytest.mark.parametrize(("owner", "collection"),
                         [(JOB, JOBS), (JOBSET, JOBSETS), (TRAINJOB, TRAINJOBS)],
                         ids=["Job", "JobSet", "TrainJob"])
def test_a_stuck_member_suspends_its_owner_deletes_no_pod_and_resumes_it_once_pods_are_gone(
    owner: dict[str, str], collection: str
) -> None:
    """With `backoffLimit: 0` a deleted pod would fail the Job (and a JobSet or TrainJob
    built on such Jobs): the owner is suspended instead, and resumed."""
    cfg = config()
    api = FakeApi()
    api.seed(collection, owner_object(owner))
    dog, posted, counts = watchdog(api, cfg)
    pods = [*released(2, bound=1, owner=owner), taken_node()]
    pass_(dog, pods, 3, cfg)
    key = f"team/{owner['name']}"
    stored = api.objects[collection][key]
    assert stored["spec"]["suspend"] is True
    assert stored["metadata"]["labels"] == {REQUEUE_LABEL: "suspended"}
    assert stored["metadata"]["annotations"] == {REQUEUES_ANNOTATION: "1"}
    assert not any(m == "DELETE" for m, _, _ in api.calls)  # a delete would fail the Job
    assert posted.reasons() == ["GangRequeued"]
    assert f"{owner['kind']} {owner['name']} suspended" in posted.posts[0][2]
    assert counts['gangkeeper_gang_requeues_total[["cause", "rebind"], ["how", "suspend"]]'] == 1
    # The Job controller has not deleted the pods yet: no second suspension, no resume.
    pass_(dog, pods, 3, cfg, LATER + 1)
    assert methods(api, "PATCH", object_path(collection, owner["name"])) == 1
    # Its pods are gone: resumed, the label removed, the count kept.
    pass_(dog, [taken_node()], 3, cfg, LATER + 2)
    stored = api.objects[collection][key]
    assert stored["spec"]["suspend"] is False
    assert REQUEUE_LABEL not in stored["metadata"]["labels"]
    assert stored["metadata"]["annotations"] == {REQUEUES_ANNOTATION: "1"}


def test_a_suspended_job_is_resumed_after_a_while_even_if_pods_remain() -> None:
    cfg = config()
    api = FakeApi()
    api.seed(JOBS, job())
    dog, _, _ = watchdog(api, cfg)
    pods = [*released(2, bound=1, owner=JOB), taken_node()]
    pass_(dog, pods, 3, cfg)
    pass_(dog, pods, 3, cfg, LATER + RESUME_AFTER_SECONDS + 1)
    assert api.objects[JOBS]["team/train"]["spec"]["suspend"] is False


def test_a_jobs_requeues_are_bounded_by_the_count_on_the_job() -> None:
    cfg = config(rebindRetries=2)
    api = FakeApi()
    api.seed(JOBS, job(requeues=2))
    dog, posted, _ = watchdog(api, cfg)
    pass_(dog, [*released(2, bound=1, owner=JOB), taken_node()], 3, cfg)
    assert methods(api, "PATCH") == 0
    assert posted.reasons() == ["GangMemberStuck"]
    assert "retries spent" in posted.posts[0][2]
    assert "suspend and resume the Job" in posted.posts[0][2]
    # Known spent: later passes neither read the Job again nor repeat the Event.
    pass_(dog, [*released(2, bound=1, owner=JOB), taken_node()], 3, cfg, LATER + 1)
    assert methods(api, "GET") == 1
    assert posted.reasons() == ["GangMemberStuck"]


def test_a_job_suspended_by_someone_else_is_left_alone() -> None:
    cfg = config()
    api = FakeApi()
    api.seed(JOBS, job(suspend=True))
    dog, _, _ = watchdog(api, cfg)
    pass_(dog, [*released(2, bound=1, owner=JOB), taken_node()], 3, cfg)
    pass_(dog, [taken_node()], 3, cfg, LATER + 1)
    assert methods(api, "PATCH") == 0
    assert api.objects[JOBS]["team/train"]["spec"]["suspend"] is True


def test_a_new_leader_resumes_the_jobs_its_predecessor_left_suspended() -> None:
    cfg = config()
    api = FakeApi()
    api.seed(JOBS, job(labels={REQUEUE_LABEL: "suspended"}, suspend=True, requeues=1))
    dog, _, _ = watchdog(api, cfg)
    pass_(dog, [taken_node()], 3, cfg)
    stored = api.objects[JOBS]["team/train"]
    assert stored["spec"]["suspend"] is False
    assert stored["metadata"]["labels"] == {}


def test_whole_gang_deletes_stay_bounded_while_the_gang_is_gone_between_passes() -> None:
    # Deleting every member makes the gang vanish until its owner recreates it: the
    # count must survive that, or the requeues would never end.
    cfg = config(rebindRetries=1)
    api = FakeApi()
    pods = [*released(2, bound=1, owner=LWS), taken_node()]
    api.seed(PODS.path, *pods)
    dog, posted, _ = watchdog(api, cfg)
    pass_(dog, pods, 2, cfg)
    assert sorted(k for k in api.objects[PODS.path]) == ["team/thief"]
    assert posted.reasons() == ["GangRequeued"]
    assert "all 2 members deleted" in posted.posts[0][2]
    pass_(dog, [taken_node()], 2, cfg, LATER + 1)
    api.seed(PODS.path, *pods)
    pass_(dog, pods, 2, cfg, LATER + 2)
    assert posted.reasons() == ["GangRequeued", "GangMemberStuck"]
    assert len(api.objects[PODS.path]) == 3  # nothing deleted the second time


def test_a_gang_never_ready_is_requeued_once_per_instance_within_the_retries() -> None:
    cfg = config(podsReadyRequeue=True)
    api = FakeApi()
    api.seed(JOBS, job())
    dog, posted, counts = watchdog(api, cfg)
    pass_(dog, released(2, bound=2, owner=JOB), 2, cfg, T0 + 121)
    assert api.objects[JOBS]["team/train"]["spec"]["suspend"] is True
    assert posted.reasons() == ["GangNotReady", "GangRequeued"]
    assert "not Ready" in posted.posts[1][2]
    assert counts['gangkeeper_gang_requeues_total[["cause", "not-ready"], ["how", "suspend"]]'] == 1


def test_a_new_leader_resumes_every_kind_left_suspended_and_skips_kinds_not_installed() -> None:
    cfg = config()
    api = FakeApi()
    api.absent.add(TRAINJOBS)  # Trainer not installed: its list answers 404
    api.seed(JOBSETS, owner_object(JOBSET, **{REQUEUE_LABEL: "suspended"}))
    api.seed(JOBS, job(labels={REQUEUE_LABEL: "suspended"}, suspend=True, requeues=1))
    dog, _, _ = watchdog(api, cfg)
    pass_(dog, [taken_node()], 3, cfg)
    assert api.objects[JOBSETS]["team/js"]["spec"]["suspend"] is False
    assert api.objects[JOBS]["team/train"]["spec"]["suspend"] is False
    # Listed once per term, not every pass.
    pass_(dog, [taken_node()], 3, cfg, LATER + 1)
    assert sum(1 for m, p, _ in api.calls if m == "GET" and p == JOBSETS) == 1


def test_a_job_is_not_suspended_for_a_member_bound_since_the_pass_read_it() -> None:
    # Suspending the Job deletes every pod: a pass that read the member unbound must
    # not take back a gang the scheduler has bound whole meanwhile.
    cfg = config()
    api = FakeApi()
    api.seed(JOBS, owner_object(JOB))
    pods = [*released(2, bound=1, owner=JOB), taken_node()]
    api.seed(PODS.path, *pods)
    dog, posted, _ = watchdog(api, cfg)
    stored = api.objects[PODS.path]
    read = [stored[f"{p['metadata']['namespace']}/{p['metadata']['name']}"] for p in pods]
    actions = dog.actions(planned(read, 3, cfg), LATER, [pod_info(p, cfg) for p in read])
    assert [r.gang.name for r in actions.suspends] == ["g"]
    late = stored["team/g-1"]
    api.emit(PODS.path, "MODIFIED", {**late, "spec": {**late["spec"], "nodeName": "n1"}})
    dog.send(actions, LATER)
    assert api.objects[JOBS]["team/train"]["spec"].get("suspend") is not True
    assert posted.reasons() == []
