"""Certificate renewal on a running server: no request fails, the new certificate is served.

The renewal is done the way a careless tool (or a Secret volume update seen half-way)
would: the certificate file first, the key a moment later, so for a while the files on
disk do not match. Meanwhile clients keep posting AdmissionReviews, some on kept-alive
connections opened before the renewal, some with a new handshake per request.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from builders.polling import wait_for
from builders.reviews import admission_review
from http_support import Served

from gangkeeper.certs import certificate_not_after, ensure_local

REVIEW = admission_review({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": "p", "namespace": "default"},
                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})


def served_certificate(url: str, trust: ssl.SSLContext) -> bytes:
    host, port = url.removeprefix("https://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw, trust.wrap_socket(
        raw, server_hostname=host
    ) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def pem_to_der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text().split("-----END CERTIFICATE-----")[0]
                                    + "-----END CERTIFICATE-----\n")


class Load:
    """Clients posting AdmissionReviews until stopped: two on kept-alive connections
    opened before the renewal, two with a new handshake per request."""

    def __init__(self, url: str, trust: ssl.SSLContext) -> None:
        self.url, self.trust = url, trust
        self.failures: list[str] = []
        self.answered = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f) for f in
                         (self._kept_alive, self._kept_alive, self._fresh, self._fresh)]

    def _send(self, http: httpx.Client) -> None:
        response = http.post("/validate", json=REVIEW)
        if response.status_code != 200 or response.json()["response"]["allowed"] is not True:
            self.failures.append(f"{response.status_code}: {response.text[:200]}")
        self.answered += 1

    def _kept_alive(self) -> None:
        with httpx.Client(base_url=self.url, verify=self.trust, timeout=10) as http:
            while not self._stop.is_set():
                try:
                    self._send(http)
                except httpx.HTTPError as exc:
                    self.failures.append(f"kept-alive: {exc!r}")

    def _fresh(self) -> None:
        while not self._stop.is_set():
            try:
                with httpx.Client(base_url=self.url, verify=self.trust, timeout=10) as http:
                    self._send(http)
            except httpx.HTTPError as exc:
                self.failures.append(f"new connection: {exc!r}")

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=20)


def test_a_renewed_certificate_is_served_without_failing_requests_in_flight(
    start_server: Callable[..., Served], tmp_path: Path
) -> None:
    server = start_server()
    renewed = ensure_local(tmp_path / "renewed", ["localhost"], ["127.0.0.1"])
    trust = ssl.create_default_context(cafile=str(server.ca))
    trust.load_verify_locations(cafile=str(renewed.ca_cert))
    old_der = served_certificate(server.url, trust)
    new_der = pem_to_der(renewed.cert)
    assert old_der != new_der

    load = Load(server.url, trust)
    load.start()
    try:
        time.sleep(1.0)
        before = load.answered
        (server.cert_dir / "tls.crt").write_bytes(renewed.cert.read_bytes())
        time.sleep(2.5)  # longer than the poll interval: the mismatched pair is seen
        (server.cert_dir / "tls.key").write_bytes(renewed.key.read_bytes())
        wait_for(lambda: served_certificate(server.url, trust) == new_der, 20,
                 message="the renewed certificate served")
        time.sleep(1.0)
    finally:
        load.stop()
    assert load.failures == []
    assert load.answered - before > 20, "requests kept flowing during the renewal"

    with httpx.Client(base_url=server.url, verify=trust, timeout=10) as http:
        metrics = http.get("/metrics").text
    assert "gangkeeper_certificate_reloads_total 1" in metrics.splitlines()
    expiry = certificate_not_after(renewed.cert).timestamp()
    assert f"gangkeeper_certificate_expiry_timestamp_seconds {int(expiry)}" in metrics
