"""With gangkeeper down, the API server does what the registered failurePolicy says.

Namespaces that did not opt in never reach the webhook, so their pods are created
regardless. In an opted-in namespace a GPU pod is refused when any gangkeeper pod
webhook says `failurePolicy: Fail`, and admitted unchanged when all say Ignore; the
policy is read from the configurations gangkeeper registered, not assumed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, gang_pod, unique
from kubernetes.client.exceptions import ApiException

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
