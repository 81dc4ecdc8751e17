"""ProvisioningRequest decisions that must hold for every gang label, attempt and
sequence of failures:

(a) a request's name gives its attempt back, stays a valid object name, and is the
    same for the same gang and attempt (a restarted controller adopts it);
(b) failing every attempt, a gang makes exactly `retryLimit + 1` requests, never two
    live at once, each after the backoff since the last failure, and then gives up.
"""

from __future__ import annotations

import re

from builders.gangs import T0, members
from builders.provisioning import OWNER, condition, provisioning_request
from hypothesis import given, settings
from hypothesis import strategies as st

from gangkeeper.policies.autoscaling.provisioning import RequestInfo, request_info, request_name
from gangkeeper.policies.cluster.observed_gangs import pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import load_config

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
labels = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,300}[a-z0-9])?", fullmatch=True)


@given(label=labels, attempt=st.integers(1, 10_000))
def test_names_give_the_attempt_back_and_are_valid_object_names(label: str, attempt: int) -> None:
    name = request_name(label, attempt)
    assert name == request_name(label, attempt)
    assert len(name) <= 240 and DNS_SUBDOMAIN.match(name)
    raw = provisioning_request(label, attempt)
    raw["metadata"]["name"] = name
    info = request_info(raw)
    assert info is not None and info.attempt == attempt


@settings(max_examples=30, deadline=None)
@given(limit=st.integers(0, 4), retry=st.integers(1, 120), lag=st.integers(0, 30))
def test_failing_every_attempt_makes_limit_plus_one_requests_then_gives_up(
    limit: int, retry: int, lag: int
) -> None:
    config = load_config({
        "pools": [{"name": "a", "maxCount": 8, "labels": {"p": "a"},
                   "allocatable": {"nvidia.com/gpu": 8}}],
        "autoscaling": "provisioningrequest", "provisioningRetrySeconds": retry,
        "provisioningRequest": {"retryLimit": limit},
    })
    pods = [pod_info(p, config) for p in members("g", 2, gpus=8, selector={"p": "a"},
                                                     owner=OWNER)]
    live: dict[str, dict[str, object]] = {}
    made: list[str] = []
    now, failed_at = T0 + 10.0, 0.0
    for _ in range((limit + 1) * (lag // retry + 18) + 5):
        infos = [i for r in live.values() if (i := request_info(r))]
        result = plan(pods, [], config, now, requests=infos)
        [ask] = result.request_asks
        for gone in ask.delete:
            del live[gone.name]
        if ask.create:
            assert not live, "two requests live at once"
            made.append(ask.name)
            live[ask.name] = provisioning_request("g", len(made))
            # cluster-autoscaler fails it `lag` seconds later.
            live[ask.name]["status"] = {"conditions": [condition("Failed", at=now + lag)]}
            failed_at = now + lag
        elif ask.event[0] == "GangProvisioningGaveUp":
            break
        else:
            latest: RequestInfo | None = infos[0] if infos else None
            assert latest is not None
            # Waiting out the backoff: not asked again before it ends.
            assert now < failed_at + retry * min(2 ** (latest.attempt - 1), 16)
        now += retry  # shorter than most backoffs: some passes wait
    assert made == [f"g-gkpr-{n}" for n in range(1, limit + 2)]
    assert ask.event[0] == "GangProvisioningGaveUp"
