"""With gangkeeper down or hung, the API server does what the registered failurePolicy
and timeoutSeconds say.

Namespaces that did not opt in never reach the webhook, so their pods are created
regardless. In an opted-in namespace a GPU pod is refused when any gangkeeper pod
webhook says `failurePolicy: Fail`, and admitted unchanged when all say Ignore; the
policy is read from the configurations gangkeeper registered, not assumed.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, gang_pod, unique
from kubernetes.client.exceptions import ApiException

from gangkeeper.webhook.sandbox.faults import Faults

POD_WEBHOOKS = ("pods.mutate.gangkeeper.io", "pods.validate.gangkeeper.io")


def _pod_failure_policies(cluster: Any) -> dict[str, str]:
    configs = [
        cluster.admission.read_mutating_webhook_configuration("gangkeeper-mutating"),
        cluster.admission.read_validating_webhook_configuration("gangkeeper-validating"),
    ]
    return {
        hook.name: hook.failure_policy
        for config in configs
        for hook in config.webhooks or []
        if hook.name in POD_WEBHOOKS
    }


@pytest.fixture
def gangkeeper_down(cluster: Any) -> Iterator[None]:
    cluster.gangkeeper_stop(kill=True)
    try:
        yield
    finally:
        cluster.gangkeeper_start()


def test_registered_pod_webhooks_declare_a_failure_policy(cluster: Any) -> None:
    policies = _pod_failure_policies(cluster)
    assert set(policies) == set(POD_WEBHOOKS)
    assert set(policies.values()) <= {"Fail", "Ignore"}


def test_with_gangkeeper_down_pods_in_namespaces_that_did_not_opt_in_are_still_created(
    cluster: Any, plain_namespace: str, gangkeeper_down: None
) -> None:
    pod = gang_pod("worker-0", unique("down"), gang="g", min_member=2)

    created = cluster.core.create_namespaced_pod(plain_namespace, pod)

    assert created.metadata.uid
    assert not created.spec.scheduling_gates


def test_with_gangkeeper_down_opted_in_pods_follow_the_registered_failure_policy(
    cluster: Any, gang_namespace: str, gangkeeper_down: None
) -> None:
    refuse = "Fail" in _pod_failure_policies(cluster).values()
    pool = unique("down")
    cluster.create_gpu_nodes(pool, 1, 1, labels={POOL_LABEL: pool})
    pod = gang_pod("worker-0", pool, gang="g", min_member=1)

    error: ApiException | None = None
    try:
        created = cluster.core.create_namespaced_pod(gang_namespace, pod)
    except ApiException as e:
        error = e

    if refuse:
        assert error is not None, "failurePolicy Fail, gangkeeper down, yet the pod was created"
        assert "gangkeeper.io" in str(error.body), error.body
    else:
        assert error is None, f"failurePolicy Ignore, yet the pod was refused: {error}"
        assert not created.spec.scheduling_gates
        with contextlib.suppress(ApiException):
            cluster.core.delete_namespaced_pod("worker-0", gang_namespace, grace_period_seconds=0)


def test_after_gangkeeper_restarts_opted_in_pods_are_gang_keyed_again(
    cluster: Any, gang_namespace: str
) -> None:
    cluster.gangkeeper_restart()
    pool = unique("restart")
    cluster.create_gpu_nodes(pool, 2, 1, labels={POOL_LABEL: pool})

    created = cluster.core.create_namespaced_pod(
        gang_namespace, gang_pod("worker-0", pool, gang="again", min_member=2)
    )

    assert [g.name for g in created.spec.scheduling_gates or []] == ["gangkeeper.io/gang"]


# -- gangkeeper hung (SIGSTOP), not down: the API server's timeoutSeconds must hold ------


@pytest.fixture
def gangkeeper_hung(cluster: Any) -> Iterator[None]:
    """The sandbox's gangkeeper frozen (SIGSTOP): its port accepts connections (the
    kernel still completes handshakes into the backlog) but nothing answers."""
    if cluster.sandbox is None:
        pytest.skip("freezing gangkeeper needs the sandbox (it runs gangkeeper as a process)")
    faults = Faults(cluster.sandbox)
    faults.signal("gangkeeper", signal.SIGSTOP)
    try:
        yield
    finally:
        faults.signal("gangkeeper", signal.SIGCONT)


def _timeout_seconds(cluster: Any) -> int:
    config = cluster.admission.read_mutating_webhook_configuration("gangkeeper-mutating")
    [hook] = [h for h in config.webhooks if h.name == "pods.mutate.gangkeeper.io"]
    return int(hook.timeout_seconds)


def test_with_gangkeeper_hung_other_pods_are_created_at_once_and_gang_pods_fail_in_time(
    cluster: Any, gang_namespace: str, plain_namespace: str, gangkeeper_hung: None
) -> None:
    timeout = _timeout_seconds(cluster)
    pool = unique("hung")
    started = time.monotonic()
    plain = cluster.core.create_namespaced_pod(
        plain_namespace, gang_pod("worker-0", pool, gang="g", min_member=2)
    )
    plain_seconds = time.monotonic() - started
    assert plain.metadata.uid and not plain.spec.scheduling_gates
    assert plain_seconds < 2.0, f"a pod gangkeeper never sees took {plain_seconds:.1f}s"

    started = time.monotonic()
    with pytest.raises(ApiException) as refused:
        cluster.core.create_namespaced_pod(
            gang_namespace, gang_pod("worker-0", pool, gang="g", min_member=1)
        )
    failed_after = time.monotonic() - started
    print(f"gang pod refused after {failed_after:.1f}s (timeoutSeconds {timeout})")
    # The documented failure (docs/install.md, "When gangkeeper is down"): failurePolicy Fail,
    # the call named, after at most timeoutSeconds — not the client's own timeout.
    message = json.loads(refused.value.body)["message"]
    assert 'failed calling webhook "pods.mutate.gangkeeper.io"' in message, message
    assert "context deadline exceeded" in message, message
    assert timeout - 0.5 <= failed_after <= timeout + 3.0
