"""The FastAPI app in-process: readiness, providers tests can override, background services.

These use Starlette's TestClient (no TLS, no socket) to reach states a real server
passes through too quickly to observe: caches not yet synced, a service that fails to
stop, an injected policy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pytest
from builders.reviews import admission_review

from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.model import KubeObject
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.server import admission
from gangkeeper.webhook.server.app import Server, create_app, get_policy
from gangkeeper.webhook.server.cluster_view import StaticClusterView
from gangkeeper.webhook.server.tls import ReloadingTLS

with warnings.catch_warnings():
    # Starlette asks for its httpx fork; the httpx it finds works for these tests.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@dataclass
class SlowView:
    """A cluster view whose caches have not listed yet."""

    synced: bool = False
    capacity: Capacity = field(default_factory=lambda: Capacity(Config()))

    def lookup(self, api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return None

    def siblings(self, namespace: str, gang_name: str) -> list[KubeObject]:
        return []


@dataclass
class Recorder:
    events: list[str]
    name: str
    fail_stop: bool = False

    def start(self) -> None:
        self.events.append(f"start {self.name}")

    def stop(self) -> None:
        self.events.append(f"stop {self.name}")
        if self.fail_stop:
            raise RuntimeError("will not stop")


@pytest.fixture
def tls(tmp_path_factory: pytest.TempPathFactory) -> ReloadingTLS:
    from gangkeeper.certs import ensure_local

    paths = ensure_local(tmp_path_factory.mktemp("certs"), ["localhost"], ["127.0.0.1"])
    return ReloadingTLS(paths.cert, paths.key)


def test_readyz_is_503_until_the_caches_have_synced(tls: ReloadingTLS) -> None:
    view = SlowView()
    server = Server(config=Config(), view=view, tls=tls)
    with TestClient(create_app(server)) as client:
        waiting = client.get("/readyz")
        assert waiting.status_code == 503
        assert waiting.json()["waiting"] == ["cluster caches not synced"]
        assert client.get("/healthz").status_code == 200, "alive while not ready"
        view.synced = True
        assert client.get("/readyz").status_code == 200


def test_readyz_is_503_without_a_serving_certificate() -> None:
    server = Server(config=Config(), view=StaticClusterView([], Config()), tls=None)
    with TestClient(create_app(server)) as client:
        assert client.get("/readyz").json()["waiting"] == ["serving certificate not loaded"]


def test_the_policy_provider_can_be_overridden(tls: ReloadingTLS) -> None:
    def deny_everything(*_: object) -> KubeObject | None:
        raise RuntimeError("lookup exploded")

    config = Config(on_unreadable="reject")
    server = Server(config=config, view=StaticClusterView([], config), tls=tls)
    app = create_app(server)

    async def failing_policy() -> admission.Policy:
        return admission.Policy(capacity=Capacity(config), lookup=deny_everything, config=config)

    app.dependency_overrides[get_policy] = failing_policy
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u",
             "controller": True}
    pod = {**POD, "metadata": {**POD["metadata"], "ownerReferences": [owner]}}
    with TestClient(app) as client:
        response = client.post("/mutate", json=admission_review(pod)).json()["response"]
    # The injected lookup fails inside the policy: answered per onUnreadable, not a 500.
    assert response["allowed"] is False
    assert response["status"]["code"] == 422


def test_services_start_with_the_app_and_all_stop_even_when_one_fails(
    tls: ReloadingTLS,
) -> None:
    events: list[str] = []
    services = [Recorder(events, "watches"), Recorder(events, "controller", fail_stop=True),
                Recorder(events, "certs")]
    server = Server(config=Config(), view=StaticClusterView([], Config()), tls=tls,
                    services=services)
    with TestClient(create_app(server)):
        assert events == ["start watches", "start controller", "start certs"]
    assert events[3:] == ["stop certs", "stop controller", "stop watches"]


def test_the_noop_endpoint_exists_only_when_asked_for(tls: ReloadingTLS) -> None:
    for enabled, status in ((False, 404), (True, 200)):
        server = Server(config=Config(), view=StaticClusterView([], Config()), tls=tls,
                        noop=enabled)
        with TestClient(create_app(server)) as client:
            assert client.post("/noop", json=admission_review(POD)).status_code == status


def test_controller_only_mode_serves_no_admission(tls: ReloadingTLS) -> None:
    server = Server(config=Config(), view=StaticClusterView([], Config()), tls=None,
                    admission=False)
    with TestClient(create_app(server)) as client:
        assert client.post("/mutate", json=admission_review(POD)).status_code == 404
        assert client.get("/metrics").status_code == 200
        assert client.get("/readyz").status_code == 200
