"""Idempotence under `reinvocationPolicy: IfNeeded`.

A second mutating webhook, served by this test on loopback and registered under a
name that sorts after `gangkeeper-mutating` (the API server calls webhooks in name
order), adds a label after gangkeeper has mutated the pod. That change makes the
API server call gangkeeper again; the stored pod must still carry one gate and one
set of gang keys (a second gate would even be refused as a duplicate).
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from builders.cluster import POOL_LABEL, gang_pod, unique

from gangkeeper.certs import ensure_local
from gangkeeper.policies.names import GATE

SECOND = "zz-e2e-relabel"
REQUESTS = re.compile(r"^gangkeeper_admission_requests_total\{([^}]*)\} (\S+)$", re.M)
MARK = "e2e.gangkeeper.io/relabelled"


@dataclass
class Seen:
    """Pods the second webhook was asked about, as the API server sent them."""

    pods: list[dict[str, Any]] = field(default_factory=list)


def _handler(seen: Seen) -> type[BaseHTTPRequestHandler]:
    class Relabel(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            pod = request["object"]
            seen.pods.append(pod)
            labels = pod["metadata"].get("labels")
            patch = (
                [{"op": "add", "path": "/metadata/labels", "value": {MARK: "true"}}]
                if labels is None
                else [{"op": "add", "path": "/metadata/labels/" + MARK.replace("/", "~1"),
                       "value": "true"}]
            )  # fmt: skip
            response = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": request["uid"],
                    "allowed": True,
                    "patchType": "JSONPatch",
                    "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
                },
            }
            body = json.dumps(response).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Relabel


def _mutate_calls(cluster: Any) -> float | None:
    """gangkeeper's count of /mutate AdmissionReviews, read from its /metrics
    (sandbox only: elsewhere gangkeeper is not reachable from the test)."""
    if cluster.sandbox is None:
        return None
    state = cluster.sandbox.state()
    tls = ssl.create_default_context(cafile=str(cluster.sandbox.gangkeeper_cert_dir / "ca.crt"))
    with urllib.request.urlopen(f"{state['gangkeeper_url']}/metrics", context=tls) as r:
        text = r.read().decode()
    return sum(float(v) for labels, v in REQUESTS.findall(text) if 'endpoint="mutate"' in labels)


@pytest.fixture
def second_mutator(cluster: Any, gang_namespace: str, tmp_path: Path) -> Iterator[Seen]:
    certs = ensure_local(tmp_path / "certs", ["localhost"], ["127.0.0.1"])
    seen = Seen()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(seen))
    # An idle keep-alive connection from the API server must not hold up teardown.
    server.daemon_threads = True
    server.block_on_close = False
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(str(certs.cert), str(certs.key))
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    cluster.admission.create_mutating_webhook_configuration(
        {
            "metadata": {"name": SECOND},
            "webhooks": [
                {
                    "name": "relabel.e2e.gangkeeper.io",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "reinvocationPolicy": "Never",
                    "timeoutSeconds": 5,
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{port}/mutate",
                        "caBundle": base64.b64encode(certs.ca_cert.read_bytes()).decode(),
                    },
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": gang_namespace}
                    },
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["pods"],
                        }
                    ],
                }
            ],
        }
    )
    try:
        yield seen
    finally:
        cluster.admission.delete_mutating_webhook_configuration(SECOND)
        server.shutdown()
        server.server_close()


def test_gangkeeper_is_registered_to_be_reinvoked_when_needed(cluster: Any) -> None:
    config = cluster.admission.read_mutating_webhook_configuration("gangkeeper-mutating")
    policies = {h.name: h.reinvocation_policy for h in config.webhooks}
    assert policies["pods.mutate.gangkeeper.io"] == "IfNeeded"


def test_a_later_webhook_changing_the_pod_leaves_one_gate_and_one_set_of_gang_keys(
    cluster: Any, gang_namespace: str, second_mutator: Seen
) -> None:
    pool = unique("reinvoke")
    cluster.create_gpu_nodes(pool, 2, 1, labels={POOL_LABEL: pool})
    # A webhook configuration takes effect once the API server's informer has it.
    probe = 0

    def relabelled() -> bool:
        nonlocal probe
        probe += 1
        name = f"probe-{probe}"
        pod = cluster.core.create_namespaced_pod(
            gang_namespace, gang_pod(name, pool, gang="probe", min_member=2), dry_run="All"
        )
        return MARK in (pod.metadata.labels or {})

    cluster.wait_for(relabelled, timeout=30, message=f"webhook {SECOND} to be called")
    second_mutator.pods.clear()
    calls_before = _mutate_calls(cluster)

    cluster.core.create_namespaced_pod(
        gang_namespace, gang_pod("worker-0", pool, gang="llama-ft", min_member=2)
    )
    pod = cluster.api_client.sanitize_for_serialization(
        cluster.core.read_namespaced_pod("worker-0", gang_namespace)
    )

    assert second_mutator.pods, f"{SECOND} was not called"
    assert [g["name"] for g in second_mutator.pods[0]["spec"].get("schedulingGates") or []] == [
        GATE
    ], "gangkeeper had not mutated the pod before the second webhook changed it"
    calls_after = _mutate_calls(cluster)
    if calls_before is not None and calls_after is not None:
        # Once before the second webhook, once more because it changed the pod.
        assert calls_after - calls_before >= 2, "the API server did not reinvoke gangkeeper"
    assert pod["metadata"]["labels"][MARK] == "true"
    assert [g["name"] for g in pod["spec"]["schedulingGates"]] == [GATE]
    labels = pod["metadata"]["labels"]
    annotations = pod["metadata"]["annotations"]
    assert labels["gangkeeper.io/gang"]
    assert annotations["gangkeeper.io/gang-name"] == "llama-ft"
    assert annotations["gangkeeper.io/min-member"] == "2"
