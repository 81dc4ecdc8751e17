"""Accelerators named in the config reach gangkeeper on a real control plane (issue 27).

The admission webhooks' match conditions select GPU pods by resource name, so that the
API server calls gangkeeper only for pods that can matter. They are rendered from the
config's `gpuResources`: the session's config adds `google.com/tpu` to the defaults,
and `sandbox up` registers the webhooks for it (`registration.register_webhooks`), as
`gangkeeper manifests --config` and the chart's `config.gpuResources` do.

Two bare pods of one gang (gangkeeper's annotations, no training-operator labels),
4 TPUs each, on two nodes of 4 TPUs:
- the first is created gated and stays gated and unbound while it is alone: a pod the
  webhooks never see is never gated and binds at once (what happened when the match
  conditions were rendered from the defaults whatever the config said);
- once the second exists both are released together and bound, one per node.
With the session's config without `google.com/tpu` this test fails at its first
assertion: the pod comes back with no gate.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import yaml
from builders.cluster import POOL_LABEL, gang_pod, unique
from conftest import SESSION_TPU, Cluster

from gangkeeper.policies.names import GATE

pytestmark = pytest.mark.e2e

TPUS = 4
#: How long a lone member is watched for a wrong release.
ALONE_SECONDS = 8.0


def tpu_pod(name: str, pool: str, gang: str) -> dict[str, Any]:
    pod = gang_pod(name, pool, gang=gang, min_member=2)
    amounts = {SESSION_TPU: str(TPUS)}
    pod["spec"]["containers"][0]["resources"] = {"requests": amounts, "limits": amounts}
    return pod


def gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or ())


def test_a_bare_tpu_gang_is_gated_and_released_whole_through_the_configured_accelerators(
    cluster: Cluster, gang_namespace: str
) -> None:
    pool = unique("tpu")
    nodes = cluster.create_gpu_nodes(pool, 2, TPUS, resource=SESSION_TPU,
                                     labels={POOL_LABEL: pool})
    first, second = (tpu_pod(f"t{i}", pool, gang="tpus") for i in range(2))

    done = cluster.kubectl("create", "-n", gang_namespace, "-f", "-",
                           input=yaml.safe_dump(first), check=False)
    assert done.returncode == 0, done.stderr
    def released() -> bool:
        pod = cluster.core.read_namespaced_pod("t0", gang_namespace)
        return not gated(pod) or bool(pod.spec.node_name)

    assert not released(), "the TPU pod was not gated: the webhooks never saw it"
    with contextlib.suppress(AssertionError):
        cluster.wait_for(released, timeout=ALONE_SECONDS, message="(expected to time out)")
    assert not released(), "one of two members released alone"

    done = cluster.kubectl("create", "-n", gang_namespace, "-f", "-",
                           input=yaml.safe_dump(second), check=False)
    assert done.returncode == 0, done.stderr

    def bound() -> list[str]:
        pods = cluster.core.list_namespaced_pod(gang_namespace).items
        return sorted(p.spec.node_name or "" for p in pods if p.metadata.name in ("t0", "t1"))

    cluster.wait_for(lambda: all(bound()) and len(bound()) == 2, timeout=60.0,
                     message="both TPU members released and bound")
    assert bound() == sorted(nodes)
