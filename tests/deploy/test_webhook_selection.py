"""Which requests the API server sends to gangkeeper: selectors and CEL match conditions.

The webhook configurations `gangkeeper manifests --url` renders are registered against a
real API server, pointing at a small HTTPS recorder owned by this test that allows every
request and remembers what it was asked. Pods and Jobs are then created (dry-run, which
webhooks with `sideEffects: None` still see) and the recorder says whether gangkeeper
would have been called. A match condition that errors would deny the pod (`Fail`), so the
"not called" cases also prove the CEL never fails on pods lacking optional fields.
"""

from __future__ import annotations

import copy
import json
import ssl
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from deploy_support import ControlPlane
from kubernetes import client

from gangkeeper.certs import ensure_local
from gangkeeper.policies.settings.config import DEFAULT_GPU_RESOURCES
from gangkeeper.webhook.install import dump_yaml, render_manifests

pytestmark = pytest.mark.e2e


class Recorder:
    """An HTTPS admission endpoint that allows everything and records (path, kind, name)."""

    def __init__(self, cert_dir: Path) -> None:
        paths = ensure_local(cert_dir, ["localhost"], ["127.0.0.1"])
        self.ca_bundle = paths.ca_cert.read_bytes()
        self.calls: list[tuple[str, str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = body["request"]
                name = (request.get("object") or {}).get("metadata", {}).get("name", "")
                path = self.path.split("?", 1)[0]  # the API server appends ?timeout=5s
                recorder.calls.append((path, request["kind"]["kind"], name))
                answer = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "response": {"uid": request["uid"], "allowed": True},
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(paths.cert, paths.key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def paths_for(self, name: str) -> set[str]:
        return {path for path, _kind, called in self.calls if called == name}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


WEBHOOK_CONFIGS = (
    ("mutatingwebhookconfiguration", "gangkeeper-mutating"),
    ("validatingwebhookconfiguration", "gangkeeper-validating"),
)


@pytest.fixture(scope="module")
def recorder(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Recorder]:
    rec = Recorder(tmp_path_factory.mktemp("recorder"))
    for kind, name in WEBHOOK_CONFIGS:
        control_plane.kubectl("delete", kind, name, "--ignore-not-found")
    # The defaults plus a TPU, as a config's `gpuResources` would give them.
    manifests = render_manifests(
        url=rec.url, ca_bundle=rec.ca_bundle, gpu_resources=(*DEFAULT_GPU_RESOURCES, TPU)
    )
    control_plane.kubectl("create", "-f", "-", input=dump_yaml(manifests))
    try:
        yield rec
    finally:
        for kind, name in WEBHOOK_CONFIGS:
            control_plane.kubectl("delete", kind, name, "--ignore-not-found")
        rec.close()


@pytest.fixture(scope="module")
def namespaces(control_plane: ControlPlane) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:6]
    enabled = {"gangkeeper.io/enabled": "true"}
    # kube-system and gangkeeper's own namespace are opted in here on purpose: the
    # webhooks must exclude them by name even when labelled.
    control_plane.kubectl("label", "namespace", "kube-system", "gangkeeper.io/enabled=true")
    control_plane.kubectl(
        "label", "namespace", "gangkeeper-system", "gangkeeper.io/enabled=true", "--overwrite"
    )
    return {
        "gang": control_plane.namespace(f"sel-gang-{suffix}", enabled),
        "plain": control_plane.namespace(f"sel-plain-{suffix}", {}),
        "kube-system": "kube-system",
        "gangkeeper-system": "gangkeeper-system",
    }


def pod(**changes: Any) -> dict[str, Any]:
    """A pod Pod Security `restricted` accepts (gangkeeper-system enforces it)."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{uuid.uuid4().hex[:10]}", "labels": {}, "annotations": {}},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/trainer:1",
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                        "runAsUser": 1000,
                    },
                }
            ],
        },
    }
    for edit in changes.values():
        edit(body)
    return body


def limits(resources: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    def edit(body: dict[str, Any]) -> None:
        body["spec"]["containers"][0]["resources"] = {"limits": resources}

    return edit


def init_limits(resources: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    def edit(body: dict[str, Any]) -> None:
        init = copy.deepcopy(body["spec"]["containers"][0])
        init["name"] = "init"
        init["resources"] = {"limits": resources}
        body["spec"]["initContainers"] = [init]

    return edit


def label(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    return lambda body: body["metadata"]["labels"].update({key: value})


def annotate(key: str, value: str) -> Callable[[dict[str, Any]], None]:
    return lambda body: body["metadata"]["annotations"].update({key: value})


def claims(entries: list[dict[str, str]]) -> Callable[[dict[str, Any]], None]:
    """DRA: the pod's devices come from resource claims, not container limits."""
    return lambda body: body["spec"].update({"resourceClaims": entries})


def cpu(body: dict[str, Any]) -> None:
    body["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1"},
        "limits": {"cpu": "1"},
    }


GPU = {"nvidia.com/gpu": "1"}
TPU = "google.com/tpu"
BOTH = {"/mutate", "/validate"}

POD_CASES = [
    pytest.param("gang", pod(r=limits(GPU)), BOTH, id="gpu-limit"),
    pytest.param("gang", pod(r=limits({"amd.com/gpu": "2"})), BOTH, id="amd-gpu"),
    pytest.param("gang", pod(r=limits({"nvidia.com/mig-1g.5gb": "1"})), BOTH, id="mig-slice"),
    pytest.param("gang", pod(c=cpu, i=init_limits(GPU)), BOTH, id="gpu-only-in-init-container"),
    pytest.param("gang", pod(r=limits({TPU: "4"})), BOTH, id="configured-tpu"),
    pytest.param("gang", pod(r=limits({"aws.amazon.com/neuroncore": "1"})), set(),
                 id="accelerator-not-configured"),
    pytest.param(
        "gang", pod(c=cpu, d=claims([{"name": "gpus", "resourceClaimTemplateName": "t"}])),
        BOTH, id="dra-claim-template",
    ),
    pytest.param("gang", pod(c=cpu, d=claims([])), set(), id="empty-resource-claims"),
    pytest.param("gang", pod(c=cpu), set(), id="cpu-pod"),
    pytest.param("gang", pod(), set(), id="no-resources-at-all"),
    pytest.param(
        "gang",
        pod(c=cpu, l=label("jobset.sigs.k8s.io/jobset-name", "train")),
        BOTH,
        id="cpu-jobset-member",
    ),
    pytest.param(
        "gang",
        pod(c=cpu, l=label("training.kubeflow.org/job-name", "ft")),
        BOTH,
        id="cpu-training-operator-member",
    ),
    pytest.param(
        "gang",
        pod(c=cpu, a=annotate("gangkeeper.io/gang-name", "g1")),
        BOTH,
        id="explicit-gang-annotation",
    ),
    pytest.param(
        "gang", pod(r=limits(GPU), s=label("gangkeeper.io/skip", "true")), set(), id="skip-label"
    ),
    pytest.param(
        "gang", pod(r=limits(GPU), s=label("gangkeeper.io/skip", "false")), BOTH, id="skip-false"
    ),
    pytest.param("plain", pod(r=limits(GPU)), set(), id="namespace-not-opted-in"),
    pytest.param("kube-system", pod(r=limits(GPU)), set(), id="kube-system"),
    pytest.param("gangkeeper-system", pod(r=limits(GPU)), set(), id="gangkeepers-own-namespace"),
]


@pytest.mark.parametrize(("where", "body", "expected"), POD_CASES)
def test_pod_creation_reaches_gangkeeper_only_when_it_matters(
    control_plane: ControlPlane,
    *,
    recorder: Recorder,
    namespaces: dict[str, str],
    where: str,
    body: dict[str, Any],
    expected: set[str],
) -> None:
    core = client.CoreV1Api(control_plane.api_client)
    core.create_namespaced_pod(namespaces[where], body, dry_run="All")
    assert recorder.paths_for(body["metadata"]["name"]) == expected


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": 2,
            "parallelism": 2,
            "completionMode": "Indexed",
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.invalid/trainer:1"}],
                }
            },
        },
    }


@pytest.mark.parametrize(("where", "expected"), [("gang", {"/validate"}), ("plain", set())])
def test_workloads_reach_only_the_validating_webhook_in_opted_in_namespaces(
    control_plane: ControlPlane,
    *,
    recorder: Recorder,
    namespaces: dict[str, str],
    where: str,
    expected: set[str],
) -> None:
    name = f"j-{uuid.uuid4().hex[:10]}"
    batch = client.BatchV1Api(control_plane.api_client)
    batch.create_namespaced_job(namespaces[where], job(name), dry_run="All")
    assert recorder.paths_for(name) == expected
