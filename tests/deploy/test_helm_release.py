"""`helm install`, `helm upgrade` and `helm uninstall` of the chart on a real sandbox.

The sandbox runs the real control plane and kwok, which plays the kubelet of two fake
Nodes: the chart's Deployment is scheduled and its pods are reported Running and Ready,
but no container runs. So the webhooks are pointed (`webhook.url`, `webhook.caBundle`)
at the gangkeeper server the sandbox runs on loopback, and the test checks:

- install: every object is accepted; the rollout completes as the Deployment's and
  its ReplicaSet's status report it; the API server calls the webhooks the release
  registered (a gang pod comes back gated);
- upgrade: new pod annotations roll a new ReplicaSet to ready while the old one goes
  to zero; the changed webhook timeout is stored; the webhooks still answer;
- uninstall: the webhooks, the Deployment and the RBAC are gone; a gang pod that was
  waiting gated stays gated and unscheduled (nobody lifts gangkeeper's gate any
  more), new pods are no longer gated, and the recovery the operator guide gives
  (a JSON patch removing only gangkeeper's gate) lets the waiting pod schedule.

The sandbox registered its own RBAC and webhook configurations before; the release
adopts them with `--take-ownership` (how an installation made with kustomize moves to
Helm, docs/operator-guide.md).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from builders import polling
from deploy_support import REPO
from kubernetes import client
from kubernetes import config as kube_config

from gangkeeper.policies.names import GANG_NAME_ANNOTATION, GATE, MIN_MEMBER_ANNOTATION
from gangkeeper.webhook.sandbox import BUILD_COMMAND, BinariesMissing, Sandbox
from gangkeeper.webhook.sandbox.neighbours import KWOK

pytestmark = pytest.mark.e2e

T = TypeVar("T")
CHART = REPO / "deploy" / "helm" / "gangkeeper"
NAMESPACE = "gangkeeper-system"
RELEASE = "gangkeeper"
OPTED_IN = "default"
#: What docs/operator-guide.md tells an operator to run for each pod still gated after
#: an uninstall: remove gangkeeper's gate, and only if it is the one at that index.
UNGATE_PATCH = (
    '[{"op": "test", "path": "/spec/schedulingGates/0/name", "value": "gangkeeper.io/gang"},'
    ' {"op": "remove", "path": "/spec/schedulingGates/0"}]'
)


class Release:
    """The sandbox, helm and kubectl pointed at it."""

    def __init__(self, sandbox: Sandbox, helm: Path, url: str, api: Any) -> None:
        self.sandbox = sandbox
        self.helm_bin = helm
        self.url = url
        self.api = api
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)

    def helm(self, *args: str) -> str:
        argv = [str(self.helm_bin), f"--kubeconfig={self.sandbox.kubeconfig}", *args]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=180)
        assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
        return done.stdout

    def kubectl(self, *args: str, input: str | None = None) -> str:
        done = self.sandbox.kubectl(*args, input=input, check=False)
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def values(self, *extra: str) -> list[str]:
        ca = self.sandbox.gangkeeper_cert_dir / "ca.crt"
        return [
            "--set", f"webhook.url={self.url}",
            "--set-file", f"webhook.caBundle={ca}",
            *extra,
        ]  # fmt: skip


def wait_for(predicate: Callable[[], T], what: str, timeout: float = 90.0) -> T:
    return polling.wait_for(predicate, timeout, interval=0.3, message=what)


@pytest.fixture(scope="module")
def release(helm_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    sandbox = Sandbox(tmp_path_factory.mktemp("helm-sandbox"))
    try:
        info = sandbox.up(node_count=2, components=(KWOK,))
    except BinariesMissing as exc:
        pytest.fail(f"{exc} (build: {BUILD_COMMAND})", pytrace=False)
    api = kube_config.new_client_from_config(config_file=str(info.kubeconfig))
    assert info.gangkeeper_url is not None
    try:
        yield Release(sandbox, helm_bin, info.gangkeeper_url, api)
    finally:
        api.close()
        sandbox.down()


def gang_pod(name: str, gang: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {GANG_NAME_ANNOTATION: gang, MIN_MEMBER_ANNOTATION: str(size)},
        },
        "spec": {
            "containers": [
                {
                    "name": "train",
                    "image": "registry.invalid/train",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }


def gated(pod: dict[str, Any]) -> bool:
    return any(g["name"] == GATE for g in pod["spec"].get("schedulingGates") or [])


def pod_json(r: Release, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = json.loads(r.kubectl("get", "pod", name, "-n", OPTED_IN, "-o", "json"))
    return pod


def answered_by_gangkeeper(r: Release) -> bool:
    """A server-side dry run of a gang pod comes back gated: the API server called the
    mutating webhook (nothing is created)."""
    out = r.kubectl(
        "create", "--dry-run=server", "-n", OPTED_IN, "-o", "json", "-f", "-",
        input=json.dumps(gang_pod("helm-probe", "helm-probe", 1)),
    )  # fmt: skip
    return gated(json.loads(out))


def rolled_out(r: Release, replicas: int, name: str = "gangkeeper") -> list[Any] | None:
    """The ReplicaSets once the Deployment's status says the rollout is complete."""
    deployment = r.apps.read_namespaced_deployment(name, NAMESPACE)
    status = deployment.status
    done = (
        status.observed_generation == deployment.metadata.generation
        and status.updated_replicas == replicas
        and status.ready_replicas == replicas
        and status.available_replicas == replicas
        and (status.replicas or 0) == replicas
    )
    if not done:
        return None
    sets = r.apps.list_namespaced_replica_set(
        NAMESPACE, label_selector=f"app.kubernetes.io/name={name}"
    ).items
    revision = "deployment.kubernetes.io/revision"
    return sorted(sets, key=lambda s: int(s.metadata.annotations[revision]))


def stored_hooks(r: Release) -> list[dict[str, Any]]:
    hooks = []
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        name = "gangkeeper-" + kind.removesuffix("webhookconfiguration")
        obj = json.loads(r.kubectl("get", kind, name, "-o", "json"))
        assert obj["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
        hooks += obj["webhooks"]
    return hooks


def test_install_rolls_out_and_the_webhooks_answer(release: Release) -> None:
    release.helm(
        "install", RELEASE, str(CHART), "-n", NAMESPACE, "--take-ownership",
        *release.values(),
    )  # fmt: skip
    sets = wait_for(lambda: rolled_out(release, 2), "the Deployment's rollout")
    assert [(s.status.replicas, s.status.ready_replicas) for s in sets] == [(2, 2)]
    pods = release.core.list_namespaced_pod(
        NAMESPACE, label_selector="app.kubernetes.io/name=gangkeeper"
    ).items
    assert len(pods) == 2 and all(p.spec.node_name for p in pods)
    # The controller runs in its own Deployment, beside admission's.
    sets = wait_for(lambda: rolled_out(release, 2, "gangkeeper-controller"),
                    "the controller Deployment's rollout")
    assert [(s.status.replicas, s.status.ready_replicas) for s in sets] == [(2, 2)]
    for hook in stored_hooks(release):
        assert hook["clientConfig"]["url"].startswith(release.url)
        assert hook["timeoutSeconds"] == 5
    assert wait_for(lambda: answered_by_gangkeeper(release), "the release's webhooks")
    status = json.loads(release.helm("status", RELEASE, "-n", NAMESPACE, "-o", "json"))
    assert status["info"]["status"] == "deployed"


def test_upgrade_rolls_a_new_replicaset_and_the_webhooks_still_answer(
    release: Release,
) -> None:
    release.helm(
        "upgrade", RELEASE, str(CHART), "-n", NAMESPACE,
        *release.values(
            "--set-string", "podAnnotations.example\\.com/rollout=2",
            "--set", "webhook.timeoutSeconds=7",
        ),
    )  # fmt: skip

    def new_set_only() -> list[Any] | None:
        sets = rolled_out(release, 2)
        if sets is None or len(sets) != 2 or sets[0].status.replicas != 0:
            return None
        return sets

    old, new = wait_for(new_set_only, "the new ReplicaSet to take over")
    assert (new.status.replicas, new.status.ready_replicas) == (2, 2)
    assert new.spec.template.metadata.annotations["example.com/rollout"] == "2"
    assert old.spec.replicas == 0
    assert {h["timeoutSeconds"] for h in stored_hooks(release)} == {7}
    assert wait_for(lambda: answered_by_gangkeeper(release), "the webhooks after upgrade")
    history = json.loads(release.helm("history", RELEASE, "-n", NAMESPACE, "-o", "json"))
    assert [h["status"] for h in history] == ["superseded", "deployed"]


def test_uninstall_leaves_waiting_pods_gated_until_the_gate_is_removed(
    release: Release,
) -> None:
    # A gang of 2 with one member so far: gated, waiting for its sibling.
    release.core.create_namespaced_pod(OPTED_IN, gang_pod("waiting-0", "waiting", 2))
    assert gated(pod_json(release, "waiting-0"))

    release.helm("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    release.sandbox.stop_gangkeeper()  # the uninstalled release's replicas are gone too
    for kind, name in (
        ("mutatingwebhookconfiguration", "gangkeeper-mutating"),
        ("validatingwebhookconfiguration", "gangkeeper-validating"),
        ("clusterrole", "gangkeeper"),
    ):
        assert not release.kubectl("get", kind, "--ignore-not-found", name, "-o", "name")
    wait_for(
        lambda: not release.kubectl(
            "get", "deployment,replicaset,pod", "-n", NAMESPACE, "-l",
            "app.kubernetes.io/part-of=gangkeeper", "-o", "name",
        ).strip(),
        "the release's Deployment, ReplicaSets and pods to go",
    )  # fmt: skip

    # Nothing lifts gangkeeper's gate any more: the waiting pod stays pending.
    time.sleep(3)
    waiting = pod_json(release, "waiting-0")
    assert gated(waiting)
    assert not waiting["spec"].get("nodeName")
    # New pods are no longer mutated: they are neither gated nor gang-keyed.
    new = json.loads(
        release.kubectl(
            "create", "--dry-run=server", "-n", OPTED_IN, "-o", "json", "-f", "-",
            input=json.dumps(gang_pod("after-uninstall", "after", 2)),
        )
    )  # fmt: skip
    assert not gated(new)

    # The operator guide's recovery: remove gangkeeper's gate (and only that gate).
    release.kubectl("patch", "pod", "waiting-0", "-n", OPTED_IN, "--type=json", "-p", UNGATE_PATCH)
    wait_for(
        lambda: release.core.read_namespaced_pod("waiting-0", OPTED_IN).spec.node_name,
        "the ungated pod to be scheduled",
    )
