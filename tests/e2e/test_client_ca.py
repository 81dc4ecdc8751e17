"""`serve --client-ca` on the sandbox: the API server authenticates to gangkeeper with mTLS.

The sandbox's kube-apiserver presents a client certificate (issued by the cluster CA)
to every webhook through its AdmissionConfiguration kubeconfig
(`webhook/sandbox/admission_config.py`). gangkeeper is restarted with `--client-ca`
set to the cluster CA: a gang pod created through the API server is still gang-keyed
(so the API server's certificate was accepted), while the same review sent to
gangkeeper directly without a certificate gets 401, and with a certificate the cluster
CA signed gets its answer. Nothing here mocks the API server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from builders.cluster import POOL_LABEL, gang_pod, unique

from gangkeeper.policies.names import GATE


@pytest.fixture
def mtls(cluster: Any) -> Iterator[Any]:
    """gangkeeper requiring a certificate signed by the cluster CA (the API server's is)."""
    if cluster.sandbox is None:
        pytest.skip("needs the sandbox: its API server presents the client certificate")
    ca = cluster.sandbox.directory / "pki" / "ca.crt"
    sandbox = cluster.gangkeeper_restart("--client-ca", str(ca))
    try:
        yield sandbox
    finally:
        cluster.gangkeeper_restart()


def _direct(sandbox: Any, cert: tuple[str, str] | None) -> httpx.Client:
    import ssl

    context = ssl.create_default_context(cafile=str(sandbox.gangkeeper_cert_dir / "ca.crt"))
    if cert is not None:
        context.load_cert_chain(*cert)
    return httpx.Client(base_url=sandbox.state()["gangkeeper_url"], verify=context, timeout=10)


def test_the_api_servers_client_certificate_is_accepted(
    cluster: Any, gang_namespace: str, mtls: Any
) -> None:
    pool = unique("mtls")
    # A node of its pool: with other tests' GPU nodes about and none in this pool, the
    # gang could never run and gangkeeper would rightly refuse it (CI saw that order).
    cluster.create_gpu_nodes(pool, 1, 8, labels={POOL_LABEL: pool})
    pod = gang_pod("worker-0", pool, gang="g", min_member=2)
    created = cluster.core.create_namespaced_pod(gang_namespace, pod, dry_run="All")
    assert GATE in [g.name for g in created.spec.scheduling_gates or []]


def test_a_caller_without_the_certificate_is_refused(mtls: Any) -> None:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "operation": "CREATE", "namespace": "default",
                          "object": {"apiVersion": "v1", "kind": "Pod",
                                     "metadata": {"name": "p"}, "spec": {"containers": []}}}}
    with _direct(mtls, None) as http:
        refused = http.post("/mutate", content=json.dumps(review))
        assert http.get("/readyz").status_code == 200
    assert refused.status_code == 401
    pki = mtls.directory / "pki"
    with _direct(mtls, (str(pki / "webhook-client.crt"), str(pki / "webhook-client.key"))) as http:
        answered = http.post("/mutate", content=json.dumps(review))
    assert answered.status_code == 200, answered.text
    assert answered.json()["response"]["uid"] == "u"
