"""Certificate renewal with two replicas under load (issue 14, extends
tests/http/test_http_tls_reload.py to the deployed shape).

Two `gangkeeper serve` processes (the sandbox's, which the API server calls, and a
second one started as tests/e2e/test_replicas.py starts it) serve from the same
certificate files. The files are a Secret in cert-manager's format (`tls.crt`,
`tls.key`, `ca.crt`) issued the way cert-manager issues gangkeeper's own cert-manager
objects (`render_manifests(cert_mode="cert-manager")`, interpreted by
`builders.cert_manager`), projected as the kubelet projects a Secret volume, with the
webhooks' `caBundle` filled from the Secret's `ca.crt` as cert-manager's CA injector
does. cert-manager itself does not run here (see docs/install.md).

While pods are created through the API server in a steady stream, and each replica is
sent AdmissionReviews directly (a new TLS handshake each), the serving certificate is
renewed: the Secret is replaced (a new key), the CA injector writes `caBundle`, then
the kubelet swaps the files. No admission may fail (a create refused, or a pod admitted
without gangkeeper's gate), and both replicas must serve the new certificate (its
serial, read from a TLS handshake).

The order matters only if `caBundle` changes: with a self-signed serving certificate
(what gangkeeper's cert-manager objects issued before), the API server trusts only the
new certificate while the replicas still serve the old one, until the kubelet's next
sync — every admission in that window fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders.cert_manager import (
    CertManager,
    ca_bundles,
    inject_ca_bundle,
    project,
    read_secret,
    serial_of,
    served_serial,
    write_secret,
)
from builders.cluster import gang_pod
from builders.faults import GANGKEEPER_NAMESPACE, cordoned_pool, metrics, review_answer
from kubernetes.client.exceptions import ApiException

from gangkeeper.policies.names import CERTIFICATE_NAME, GATE, SECRET_NAME
from gangkeeper.webhook.install import render_manifests
from gangkeeper.webhook.sandbox.faults import Faults

REPLICA = "gangkeeper-renewal-replica"
#: The kubelet syncs a Secret volume about a minute after the Secret changes; the
#: test waits less, long enough for creates to go through meanwhile.
KUBELET_LAG_CREATES = 10
RELOADS = "gangkeeper_certificate_reloads_total"


@pytest.fixture(autouse=True)
def _sandbox_only(cluster: Any) -> None:
    if cluster.sandbox is None:
        pytest.skip("two replicas as processes and their certificate files need the sandbox")


class Stream:
    """Pods created through the API server (two threads) and AdmissionReviews sent to
    each replica directly, until stopped; every outcome timestamped."""

    def __init__(self, cluster: Any, namespace: str, pool: str, urls: dict[str, str]) -> None:
        self.cluster, self.namespace, self.pool, self.urls = cluster, namespace, pool, urls
        self.creates: list[float] = []
        self.probes: list[float] = []
        self.failures: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._create, args=(n,)) for n in range(2)]
        self._threads += [threading.Thread(target=self._probe, args=(n,)) for n in urls]

    def _create(self, worker: int) -> None:
        count = 0
        while not self._stop.is_set():
            name = f"r{worker}-{count:04d}"
            pod = gang_pod(name, self.pool, gang=f"r{worker}-{count // 4}", min_member=4)
            try:
                made = self.cluster.core.create_namespaced_pod(self.namespace, pod)
                gates = [g.name for g in made.spec.scheduling_gates or []]
                outcome = None if GATE in gates else f"{name}: admitted without the gate"
            except ApiException as exc:
                outcome = f"{name}: {exc.status} {str(exc.body)[:300]}"
            self._record(self.creates, outcome)
            count += 1

    def _probe(self, name: str) -> None:
        while not self._stop.is_set():
            try:
                answer = review_answer(self.cluster, self.urls[name], self.namespace, self.pool)
                outcome = None if answer.get("allowed") and answer.get("patch") else (
                    f"{name}: {answer}")
            except Exception as exc:  # any failure to answer is the finding
                outcome = f"{name}: {exc!r}"
            self._record(self.probes, outcome)
            time.sleep(0.05)

    def _record(self, into: list[float], failure: str | None) -> None:
        with self._lock:
            into.append(time.monotonic())
            if failure is not None:
                self.failures.append((time.monotonic(), failure))

    def between(self, start: float, end: float) -> tuple[int, int]:
        with self._lock:
            return (sum(1 for t in self.creates if start <= t <= end),
                    sum(1 for t in self.probes if start <= t <= end))

    def __enter__(self) -> Stream:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)


@pytest.fixture
def replicas(cluster: Any) -> Iterator[dict[str, str]]:
    """The sandbox's gangkeeper and a second replica, both serving from the sandbox's
    certificate directory; the directory's files and `caBundle` put back afterwards."""
    faults = Faults(cluster.sandbox)
    cert_dir: Path = cluster.sandbox.gangkeeper_cert_dir
    original = {k: (cert_dir / k).read_bytes() for k in ("tls.crt", "tls.key", "ca.crt")}
    bundles = ca_bundles(cluster)
    url = faults.start_replica(REPLICA)
    urls = {"gangkeeper": str(cluster.sandbox.state()["gangkeeper_url"]), REPLICA: url}
    try:
        yield urls
    finally:
        # Back to the sandbox's own CA without a gap: trust both, swap, trust the old.
        inject_ca_bundle(cluster, b"".join(ca_bundles(cluster)) + original["ca.crt"])
        project(original, cert_dir, 99)
        serial = serial_of(original["tls.crt"])
        cluster.wait_for(lambda: all(served_serial(u) == serial for u in urls.values()),
                         timeout=60, message="the sandbox's own certificate served again")
        inject_ca_bundle(cluster, b"".join(bundles))
        faults.processes.stop(REPLICA)
        cluster.core.delete_namespaced_secret(SECRET_NAME, GANGKEEPER_NAMESPACE)


def _cert_manager() -> CertManager:
    objects = render_manifests(GANGKEEPER_NAMESPACE, cert_mode="cert-manager")
    return CertManager([o for o in objects if o["apiVersion"] == "cert-manager.io/v1"],
                       ["localhost"], ["127.0.0.1"])


def test_a_cert_manager_renewal_fails_no_admission_and_both_replicas_serve_the_new_certificate(
    cluster: Any, gang_namespace: str, replicas: dict[str, str]
) -> None:
    cert_dir: Path = cluster.sandbox.gangkeeper_cert_dir
    issuer = _cert_manager()
    pool, _ = cordoned_pool(cluster, "renewal", 1, 8)  # admitted and gated, never released

    # Installed: cert-manager issues the Secret, the CA injector and the kubelet follow
    # (the old caBundle kept too, so the switch from the sandbox's CA fails nothing).
    first = issuer.issue(CERTIFICATE_NAME)
    write_secret(cluster, GANGKEEPER_NAMESPACE, SECRET_NAME, first)
    inject_ca_bundle(cluster, b"".join(ca_bundles(cluster)) + first["ca.crt"])
    project(read_secret(cluster, GANGKEEPER_NAMESPACE, SECRET_NAME), cert_dir, 1)
    cluster.wait_for(
        lambda: all(served_serial(u) == serial_of(first["tls.crt"]) for u in replicas.values()),
        timeout=60, message="both replicas serve the issued certificate")
    inject_ca_bundle(cluster, first["ca.crt"])
    reloads = {n: metrics(cluster, u).get(RELOADS, 0.0) for n, u in replicas.items()}

    with Stream(cluster, gang_namespace, pool, replicas) as stream:
        cluster.wait_for(lambda: len(stream.creates) >= 20 and len(stream.probes) >= 20,
                         timeout=120, message="creates and probes flowing")
        assert stream.failures == [], stream.failures[:3]
        # Renewal: a new key and certificate in the Secret; the CA injector writes the
        # Secret's ca.crt; the kubelet swaps the files some time later.
        started = time.monotonic()
        second = issuer.issue(CERTIFICATE_NAME)
        write_secret(cluster, GANGKEEPER_NAMESPACE, SECRET_NAME, second)
        inject_ca_bundle(cluster, read_secret(cluster, GANGKEEPER_NAMESPACE,
                                              SECRET_NAME)["ca.crt"])
        injected = len(stream.creates)
        cluster.wait_for(lambda: len(stream.creates) >= injected + KUBELET_LAG_CREATES,
                         timeout=120, message="creates while the files are not yet swapped")
        swapped = time.monotonic()
        project(read_secret(cluster, GANGKEEPER_NAMESPACE, SECRET_NAME), cert_dir, 2)
        new = serial_of(second["tls.crt"])
        cluster.wait_for(lambda: all(served_serial(u) == new for u in replicas.values()),
                         timeout=60, interval=0.1, message="both replicas serve the renewal")
        both = time.monotonic()
        # And the API server's calls keep succeeding on the new certificate.
        mark = len(stream.creates)
        cluster.wait_for(lambda: len(stream.creates) >= mark + 20, timeout=120,
                         message="creates after the renewal")
    creates, probes = stream.between(started, both)
    print(f"renewal under load: {creates} creates through the API server and {probes} direct "
          f"probes during the renewal ({both - started:.1f} s), {len(stream.failures)} failed; "
          f"both replicas served the new certificate {both - swapped:.1f} s after the files "
          f"were swapped; {len(stream.creates)} creates, {len(stream.probes)} probes in all")
    assert stream.failures == [], (f"{len(stream.failures)} admissions failed, first: "
                                   f"{stream.failures[:3]}")
    assert ca_bundles(cluster) == {second["ca.crt"]}
    for name, url in replicas.items():
        # Reloaded in place, not restarted (a poll that hashed the two files either side of
        # the `..data` swap reloads once more, harmlessly).
        assert metrics(cluster, url).get(RELOADS, 0.0) >= reloads[name] + 1, name
