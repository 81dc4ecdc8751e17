"""`serve --client-ca FILE`: admission only for clients with a certificate that CA signed.

Over real TLS: with no client certificate /mutate and /validate answer 401 (and the
probes' and scrapers' endpoints still answer); a certificate the CA signed gets the
usual AdmissionReview; one from another CA fails the handshake. The sandbox test
(tests/e2e/test_client_ca.py) shows the API server presenting its certificate.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from builders.reviews import admission_review
from http_support import Served

from gangkeeper.webhook.sandbox.pki import ClusterPKI, create_pki

GOOD = admission_review({
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
})


def _pki(directory: Path) -> ClusterPKI:
    return create_pki(directory, service_ip="10.0.0.1", gangkeeper_service_account=("ns", "sa"))


@pytest.fixture(scope="module")
def pkis(tmp_path_factory: pytest.TempPathFactory) -> tuple[ClusterPKI, ClusterPKI]:
    return _pki(tmp_path_factory.mktemp("trusted")), _pki(tmp_path_factory.mktemp("other"))


@pytest.fixture(scope="module")
def mtls(start_server: Callable[..., Served], pkis: tuple[ClusterPKI, ClusterPKI]) -> Served:
    return start_server("--client-ca", str(pkis[0].ca.cert))


def _client(served: Served, pki: ClusterPKI | None) -> httpx.Client:
    context = served.trust()
    if pki is not None:
        context.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
    return httpx.Client(base_url=served.url, verify=context, timeout=10)


@pytest.mark.parametrize("endpoint", ["mutate", "validate"])
def test_without_a_client_certificate_admission_is_refused_with_401(
    mtls: Served, endpoint: str
) -> None:
    with _client(mtls, None) as http:
        response = http.post(f"/{endpoint}", json=GOOD)
    assert response.status_code == 401
    assert "--client-ca" in response.json()["error"]


def test_probes_and_scrapers_need_no_client_certificate(mtls: Served) -> None:
    with _client(mtls, None) as http:
        assert http.get("/healthz").status_code == 200
        assert http.get("/readyz").status_code == 200
        assert http.get("/metrics").status_code == 200


def test_a_certificate_the_ca_signed_gets_the_answer(
    mtls: Served, pkis: tuple[ClusterPKI, ClusterPKI]
) -> None:
    with _client(mtls, pkis[0]) as http:
        response = http.post("/validate", json=GOOD)
    assert response.status_code == 200, response.text
    assert response.json()["response"]["allowed"] is True


def test_a_certificate_from_another_ca_fails_the_handshake(
    mtls: Served, pkis: tuple[ClusterPKI, ClusterPKI]
) -> None:
    # TLS 1.3: the client finishes its side first, so the refusal may surface as an
    # alert on connect or as the connection closed with no answer; never a response.
    with _client(mtls, pkis[1]) as http, pytest.raises(httpx.TransportError):
        http.post("/validate", json=GOOD)


def test_without_client_ca_no_certificate_is_asked_for(
    client: httpx.Client,
) -> None:
    assert client.post("/validate", json=GOOD).status_code == 200


def test_a_missing_client_ca_file_stops_serve_with_a_message(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "serve", "--port", "1",
         "--cert-dir", str(tmp_path / "certs"), "--client-ca", str(tmp_path / "nope.crt")],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False,
    )
    assert done.returncode == 2
    assert "--client-ca" in done.stderr and "nope.crt" in done.stderr
    assert "Traceback" not in done.stderr
