"""gangkeeper inside the sandbox: its `serve` command line, its RBAC and webhook
configurations as a real install renders them, and the probe that tells when the API
server calls it.

May touch: the sandbox directory (gangkeeper's certificates and config file), the
`gangkeeper manifests` command it runs as a user would, and the API server through
the sandbox's kubectl. Starting and stopping the process is `Sandbox`'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from gangkeeper.policies.names import GANG_NAME_ANNOTATION, GATE, MIN_MEMBER_ANNOTATION

from .errors import SandboxError
from .kubectl import Kubectl

#: What the sandbox takes from the full install manifests (the rest is the Deployment
#: and its Service, which the sandbox replaces with a local process): the identity, its
#: RBAC and the policy bounding its pod patches, so its writes pass what a real install's do.
RBAC_KINDS = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "PriorityClass",
)
CONFIG_FILE = "gangkeeper-config.yaml"


def serve_argv(
    *, kubeconfig: Path, cert_dir: Path, port: int, config: Path | None, mode: str = ""
) -> list[str]:
    """`gangkeeper serve` on loopback with self-issued certificates in `cert_dir`;
    `mode` is `--no-controller` (admission), `--controller-only` or "" (both)."""
    from gangkeeper.certs import ensure_local

    ensure_local(cert_dir, ["localhost"], ["127.0.0.1"])
    argv = [
        sys.executable, "-m", "gangkeeper.webhook.cli", "serve",
        "--kubeconfig", str(kubeconfig),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--cert-dir", str(cert_dir),
    ]  # fmt: skip
    if config is not None:
        argv += ["--config", str(config)]
    if mode:
        argv.append(mode)
    return argv


def config_file(directory: Path, backend: str | None, config: Path | None) -> Path | None:
    """The --config for serve: the user's file, with `backend` overridden when given.

    The user's file is never written to: an override goes to a copy in `directory`.
    """
    if backend is None:
        return config
    data: dict[str, Any] = {}
    if config is not None:
        loaded = yaml.safe_load(config.read_text()) or {}
        if not isinstance(loaded, dict):
            raise SandboxError(f"{config}: a gangkeeper config must be a mapping")
        data = loaded
    data["backend"] = backend
    path = directory / CONFIG_FILE
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def render(*args: str, backend: str | None) -> str:
    """Output of `gangkeeper manifests ARGS [--backend B]`, run as a user would."""
    argv = [sys.executable, "-m", "gangkeeper.webhook.cli", "manifests", *args]
    if backend:
        argv += ["--backend", backend]
    rendered = subprocess.run(argv, capture_output=True, text=True, check=False)
    if rendered.returncode != 0:
        raise SandboxError(
            f"`gangkeeper {' '.join(argv[3:])}` failed ({rendered.returncode}): "
            f"{rendered.stderr.strip()}"
        )
    return rendered.stdout


def install_rbac(kubectl: Kubectl, namespace: str, backend: str | None) -> None:
    """The namespace, ServiceAccount and RBAC of gangkeeper's install manifests:
    gangkeeper runs with exactly the permissions a real install grants it."""
    docs = yaml.safe_load_all(render("--namespace", namespace, backend=backend))
    wanted = [d for d in docs if isinstance(d, dict) and d.get("kind") in RBAC_KINDS]
    kubectl.must("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(wanted))


def register_webhooks(
    kubectl: Kubectl, url: str, ca: Path, backend: str | None, config: Path | None = None
) -> None:
    """Register the webhooks for the server at `url`; with the config `serve` reads, so
    the pods its `gpuResources` name (google.com/tpu) reach it."""
    extra = ["--config", str(config)] if config is not None else []
    rendered = render("--url", url, "--ca-bundle", str(ca), *extra, backend=backend)
    kubectl.must("apply", "--server-side", "-f", "-", input=rendered)


def webhook_reached(kubectl: Kubectl, namespace: str) -> bool:
    """Whether the API server's call to gangkeeper got an answer (the probe pod gated or
    refused by gangkeeper), not a transport error.

    After gangkeeper restarts, the API server's webhook client may still hold a
    kept-alive connection to the old process; the first call on it fails with EOF
    ("failed calling webhook") and, under `Fail`, refuses the pod. `webhook_called`
    counts that as proof of registration, which it is; a restart wants the answer.
    """
    done = _probe(kubectl, namespace)
    return done.returncode == 0 or "failed calling webhook" not in done.stderr


def webhook_called(kubectl: Kubectl, namespace: str) -> bool:
    """Whether the API server now calls gangkeeper for a gang pod in `namespace` (a
    server-side dry run: nothing is created).

    Registration takes effect once the API server's informer has the new
    configurations; returning before that would let a user's first `kubectl apply`
    slip past gangkeeper. Either answer proves the call: the pod comes back gated, or
    a gangkeeper webhook refused it.
    """
    done = _probe(kubectl, namespace)
    if done.returncode != 0:
        return "gangkeeper.io" in done.stderr
    gates = json.loads(done.stdout)["spec"].get("schedulingGates") or []
    return any(g.get("name") == GATE for g in gates)


def _probe(kubectl: Kubectl, namespace: str) -> subprocess.CompletedProcess[str]:
    """A server-side dry-run create of a one-member GPU gang pod (nothing is created)."""
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "gangkeeper-sandbox-probe",
            "annotations": {GANG_NAME_ANNOTATION: "probe", MIN_MEMBER_ANNOTATION: "1"},
        },
        "spec": {
            "containers": [
                {
                    "name": "probe",
                    "image": "registry.invalid/probe",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }
    return kubectl.run(
        "create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-",
        input=json.dumps(probe), check=False,
    )  # fmt: skip
