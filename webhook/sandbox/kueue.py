"""Kueue's manager as a sandbox neighbour: real quota and admission (v0.17.0).

The binary is Kueue's own `cmd/kueue`, built by `deploy/sandbox/build.sh kueue`
with its CRDs and webhook manifests (`config/components/{crd,webhook}`). It runs
only when `--components` names it: its webhooks answer Jobs, pods, JobSets and
TrainJobs in every namespace it does not exclude, and on two shared cores every
other e2e test would pay for it.

How it is run, read from the module's source:

- `internalCertManagement.enable: true`. With it off, `cmd/kueue/main.go` builds a
  metrics certificate watcher on `/etc/kueue/metrics/certs` at once (no key moves
  it), so the sandbox lets Kueue's rotator (open-policy-agent/cert-controller
  v0.16.0) issue its own CA and serving certificate instead. The rotator `Get`s the
  Secret `kueue-webhook-server-cert` (pre-created here, empty) and fills it; on a
  cluster the kubelet then projects it into the certificate folder, and the rotator
  waits for `tls.crt` there (`rotator.go`, `ensureCertsMounted`): the sandbox copies
  `tls.crt`/`tls.key` out of the Secret into `webhook.certDir` once they appear.
- The certificate names only `kueue-webhook-service.kueue-system.svc`
  (`pkg/util/cert/cert.go`), so the webhook configurations and the CRDs' conversion
  webhooks point at that Service, and the Service is `type: ExternalName` →
  `localhost`: the API server dials `localhost:<port>` (its service resolver follows
  ExternalName) and checks the certificate against `name.namespace.svc`. The rotator
  injects its CA into the two webhook configurations (which must already exist,
  under the names it derives from the Service's) and into the conversion CRDs.
- `metrics.bindAddress: "0"`; `featureGates: {VisibilityOnDemand: false}` (else it
  writes certificates under `/visibility`); `namespace: kueue-system`; one replica,
  no leader election.
- Integrations: `batch/job`, `pod`, JobSet, TrainJob, the Kubeflow training kinds
  and `ray.io/*`. For an integration whose CRD is not installed Kueue registers the
  webhook and defers its controller until the API appears
  (`pkg/controller/jobframework/setup.go`, "deferring setting up controller"), so
  listing them costs nothing. `manageJobsWithoutQueueName: false`: only objects
  with the `kueue.x-k8s.io/queue-name` label are Kueue's.
- Nothing else by default (no `waitForPodsReady`: the e2e scenarios of
  tests/e2e/test_kueue.py hold admitted Jobs' pods longer than a short timeout
  would let them be). `Sandbox(kueue_config=...)` adds keys of Kueue's own
  Configuration, e.g. `waitForPodsReady` for bench.scheduling's `kueue` modes; the
  keys the sandbox wires itself (`SANDBOX_KEYS`) are refused.

May touch: the sandbox directory (config, certificate copies), the process it starts
through `Processes`, and the API server through the sandbox's kubectl.
"""

from __future__ import annotations

import base64
import functools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .binaries import BUILD_COMMAND, BinariesMissing, cache_root
from .kubectl import Kubectl
from .processes import Processes, free_port
from .waiting import http_ok, wait_until

#: Pinned by deploy/sandbox/kueue/go.mod (a test keeps the two in step).
KUEUE_VERSION = "v0.17.0"
KUEUE = "kueue"
BINARY = "kueue-manager"
NAMESPACE = "kueue-system"
SERVICE = "kueue-webhook-service"
SECRET = "kueue-webhook-server-cert"
CRD_DIR = "config/components/crd"
WEBHOOK_DIR = "config/components/webhook"
#: The names the rotator injects its CA into (`<service base>-{validating,mutating}-...`).
WEBHOOK_PREFIX = "kueue-"
CRDS = (
    "resourceflavors.kueue.x-k8s.io",
    "clusterqueues.kueue.x-k8s.io",
    "localqueues.kueue.x-k8s.io",
    "workloads.kueue.x-k8s.io",
)
FRAMEWORKS: tuple[str, ...] = (
    "batch/job",
    "pod",
    "jobset.x-k8s.io/jobset",
    "trainer.kubeflow.org/trainjob",
    "kubeflow.org/pytorchjob",
    "kubeflow.org/mpijob",
    "ray.io/rayjob",
    "ray.io/raycluster",
    "ray.io/rayservice",
)


def root() -> Path:
    return cache_root() / f"{KUEUE}-{KUEUE_VERSION}"


def binary() -> Path:
    return root() / "bin" / BINARY


def missing() -> list[str]:
    """What `build.sh kueue` has not built yet (empty when all is there)."""
    out = [] if os.access(binary(), os.X_OK) else [f"{KUEUE} ({binary()})"]
    out += [f"{KUEUE} ({root() / d})" for d in (CRD_DIR, WEBHOOK_DIR) if not (root() / d).is_dir()]
    return out


#: The Configuration keys `configuration()` sets for the sandbox's own wiring
#: (certificates, ports, the namespace, integrations): not for `extra` to replace.
SANDBOX_KEYS = frozenset({
    "apiVersion", "kind", "namespace", "manageJobsWithoutQueueName", "leaderElection",
    "internalCertManagement", "webhook", "health", "metrics", "featureGates",
    "integrations",
})  # fmt: skip


def check_extra(extra: Mapping[str, Any] | None) -> None:
    """ValueError naming any key of `extra` the sandbox sets itself."""
    clash = sorted(SANDBOX_KEYS & set(extra or {}))
    if clash:
        raise ValueError(
            f"kueue_config: {', '.join(clash)} set by the sandbox itself "
            f"(it may add only other keys of Kueue's Configuration)"
        )


def configuration(
    webhook_port: int, health_port: int, cert_dir: Path, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) for the sandbox, with the
    top-level keys of `extra` added (`check_extra`)."""
    check_extra(extra)
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": SERVICE,
            "webhookSecretName": SECRET,
        },
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "featureGates": {"VisibilityOnDemand": False},
        "integrations": {"frameworks": list(FRAMEWORKS)},
        **(extra or {}),
    }


def _service_ref(path: str, port: int) -> dict[str, Any]:
    return {"name": SERVICE, "namespace": NAMESPACE, "path": path, "port": port}


def crds(rendered: str, port: int) -> list[dict[str, Any]]:
    """The module's CRDs with their conversion webhooks pointed at the Service."""
    out = []
    for doc in yaml.safe_load_all(rendered):
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        webhook = (doc["spec"].get("conversion") or {}).get("webhook")
        if webhook is not None:
            webhook["clientConfig"] = {"service": _service_ref("/convert", port)}
        out.append(doc)
    return out


def webhook_configurations(rendered: str, port: int) -> list[dict[str, Any]]:
    """The module's webhook configurations, named and pointed as the rotator expects."""
    out = []
    for doc in yaml.safe_load_all(rendered):
        if not isinstance(doc, dict) or doc.get("kind") not in (
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ):
            continue
        doc["metadata"]["name"] = WEBHOOK_PREFIX + doc["metadata"]["name"]
        for webhook in doc.get("webhooks") or []:
            path = webhook["clientConfig"]["service"].get("path", "/")
            webhook["clientConfig"] = {"service": _service_ref(path, port)}
        out.append(doc)
    if not out:
        raise BinariesMissing(
            f"no webhook configurations in {root() / WEBHOOK_DIR}; rebuild with "
            f"`{BUILD_COMMAND} {KUEUE}`"
        )
    return out


def bootstrap_objects() -> str:
    """The namespace, the empty Secret the rotator fills, the ExternalName Service."""
    objects: Sequence[dict[str, Any]] = (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET, "namespace": NAMESPACE},
            "type": "Opaque",
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        },
    )
    return yaml.safe_dump_all(objects)


def established(kubectl: Kubectl) -> bool:
    """Whether Kueue's CRDs are Established (False while one has no conditions yet)."""
    done = kubectl.run(
        "wait", "--for=condition=Established", "--timeout=10s",
        *(f"crd/{c}" for c in CRDS), check=False,
    )  # fmt: skip
    return done.returncode == 0


def copy_certificate(kubectl: Kubectl, cert_dir: Path) -> bool:
    """Copy the rotator's certificate out of the Secret once it is there (the
    kubelet's projection, on a real cluster). True once copied."""
    done = kubectl.run("get", "secret", "-n", NAMESPACE, SECRET, "-o", "json", check=False)
    if done.returncode != 0:
        return False
    data = json.loads(done.stdout).get("data") or {}
    if not data.get("tls.crt") or not data.get("tls.key"):
        return False
    # The key first: the rotator and the webhook server look for tls.crt.
    (cert_dir / "tls.key").write_bytes(base64.b64decode(data["tls.key"]))
    (cert_dir / "tls.crt").write_bytes(base64.b64decode(data["tls.crt"]))
    return True


def webhooks_answer(kubectl: Kubectl) -> bool:
    """Whether a server-side dry run of a ResourceFlavor passes Kueue's webhooks."""
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "sandbox-probe"},
    }
    done = kubectl.run(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(flavor), check=False
    )
    return done.returncode == 0


def start_kueue(
    processes: Processes,
    directory: Path,
    kubectl: Kubectl,
    *,
    deadline: float,
    extra: Mapping[str, Any] | None = None,
) -> int:
    """Install Kueue's CRDs and webhooks, run its manager (its Configuration with the
    keys of `extra` added), wait until its webhooks answer. Returns its health port."""
    check_extra(extra)
    if missing():
        raise BinariesMissing(
            f"sandbox component not built: {', '.join(missing())}; build it with "
            f"`{BUILD_COMMAND} {KUEUE}` (needs Go; cached, a second run does nothing)"
        )
    work = directory / KUEUE
    cert_dir = work / "serving-certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    webhook_port, health_port = free_port(), free_port()
    kubectl.must("apply", "--server-side", "-f", "-", input=bootstrap_objects())
    definitions = crds(kubectl.kustomize(root() / CRD_DIR), webhook_port)
    kubectl.must("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(definitions))
    # Retried: `kubectl wait` right after the apply fails while a CRD has no
    # status.conditions yet ("accessor error: <nil> is of the type <nil>").
    wait_until(
        processes, f"{KUEUE} (CRDs Established)", functools.partial(established, kubectl), deadline
    )
    configurations = webhook_configurations(kubectl.kustomize(root() / WEBHOOK_DIR), webhook_port)
    kubectl.must("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(configurations))
    config_path = work / "config.yaml"
    config_path.write_text(
        yaml.safe_dump(
            configuration(webhook_port, health_port, cert_dir, extra), sort_keys=False
        )
    )
    env = {**os.environ, "KUBECONFIG": str(kubectl.kubeconfig), "GOMAXPROCS": "1"}
    processes.start(KUEUE, [str(binary()), f"--config={config_path}"], env=env)
    wait_until(
        processes,
        f"{KUEUE} (certificate in {SECRET})",
        functools.partial(copy_certificate, kubectl, cert_dir),
        deadline,
    )
    wait_until(
        processes,
        f"{KUEUE} (readyz)",
        functools.partial(http_ok, f"http://127.0.0.1:{health_port}/readyz", None),
        deadline,
    )
    wait_until(
        processes, f"{KUEUE} (webhooks)", functools.partial(webhooks_answer, kubectl), deadline
    )
    return health_port
