"""POST /mutate and /validate skip FastAPI's routing, and answer exactly as the routes do.

The fast path (`webhook.server.app.AdmissionFastPath`) exists for latency only; these tests pin
that it changes nothing a caller sees: same reviews, same body limit, same metrics, and
every other request still routed.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from builders.reviews import admission_review

from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.server import admission
from gangkeeper.webhook.server.app import Server, create_app, get_policy
from gangkeeper.webhook.server.cluster_view import StaticClusterView
from gangkeeper.webhook.server.limits import Limits
from gangkeeper.webhook.server.tls import ReloadingTLS

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

CONFIG = Config()
GPU_NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}}


def pod(name: str, gpus: int, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "team", "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "trainer", "resources": {
            "limits": {"nvidia.com/gpu": str(gpus)}}}]},
    }


REVIEWS = [
    ("a plain pod", pod("plain", 0)),
    ("a gang member that fits",
     pod("w-0", 1, **{"gangkeeper.io/gang-name": "g", "gangkeeper.io/min-member": "4"})),
    ("a gang that can never fit",
     pod("w-1", 4, **{"gangkeeper.io/gang-name": "big", "gangkeeper.io/min-member": "4"})),
    ("a pod that is not a dict", None),
]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> ReloadingTLS:
    from gangkeeper.certs import ensure_local

    paths = ensure_local(tmp_path_factory.mktemp("certs"), ["localhost"], ["127.0.0.1"])
    return ReloadingTLS(paths.cert, paths.key)


def answers(tls: ReloadingTLS, *, routed: bool, path: str, body: Any) -> tuple[int, Any, str]:
    server = Server(config=CONFIG, view=StaticClusterView([GPU_NODE], CONFIG), tls=tls)
    app = create_app(server)
    if routed:
        # Any override sends admissions through FastAPI's routes and providers.
        async def same_policy() -> admission.Policy:
            return admission.Policy(capacity=server.view.capacity, lookup=server.view.lookup,
                                    config=CONFIG, skip_namespaces=server.skip_namespaces)

        app.dependency_overrides[get_policy] = same_policy
    with TestClient(app) as client:
        response = client.post(path, json=body)
    return response.status_code, response.json(), server.metrics.render()


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
@pytest.mark.parametrize(("what", "obj"), REVIEWS)
def test_the_fast_path_answers_every_review_as_the_routed_path_does(
    tls: ReloadingTLS, path: str, what: str, obj: Any
) -> None:
    body = admission_review(obj) if obj is not None else {"kind": "AdmissionReview"}
    fast = answers(tls, routed=False, path=path, body=body)
    routed = answers(tls, routed=True, path=path, body=body)
    assert fast[:2] == routed[:2], what
    # The admission counters move the same way (durations differ, so compare counts).
    counted = [line for line in fast[2].splitlines() if "_total{" in line]
    assert counted == [line for line in routed[2].splitlines() if "_total{" in line]


def test_an_oversized_body_is_refused_on_the_fast_path_too(tls: ReloadingTLS) -> None:
    server = Server(config=CONFIG, view=StaticClusterView([], CONFIG), tls=tls,
                    limits=Limits(max_body_bytes=1000))
    with TestClient(create_app(server)) as client:
        response = client.post("/mutate", content=b"{" + b" " * 2000 + b"}",
                               headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "over the limit" in response.json()["error"]


def test_other_methods_and_paths_are_still_routed(tls: ReloadingTLS) -> None:
    server = Server(config=CONFIG, view=StaticClusterView([], CONFIG), tls=tls)
    with TestClient(create_app(server)) as client:
        assert client.get("/mutate").status_code == 405
        assert client.get("/healthz").text == "ok\n"
        assert client.post("/mutate/extra", json={}).status_code == 404
