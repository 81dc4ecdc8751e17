"""The four control-plane processes of the sandbox: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler, each with the flags a throwaway loopback
cluster needs (and why, where it is not obvious).

May touch: the sandbox directory it is given (etcd data, serving-cert dirs) and the
processes it starts through `Processes`. Never another address than 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .admission_config import write_admission_config
from .binaries import Binaries
from .pki import ClusterPKI
from .processes import Processes, free_port

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_IP = "10.0.0.1"
KCM_CONTROLLERS = (
    "job-controller",
    # Fills a ResourceQuota's status; until it does, quota admission refuses every pod
    # of its namespace (placeholders are charged to quota: tests show what users see).
    "resourcequota-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    # Publishes kube-root-ca.crt, which every projected service-account volume names.
    "root-ca-certificate-publisher-controller",
    # LeaderWorkerSet runs its groups as StatefulSets; installs roll out Deployments.
    "statefulset-controller",
    "deployment-controller",
    "replicaset-controller",
    # Keeps PodDisruptionBudgets' status (disruptionsAllowed), which the Eviction API
    # enforces and preemption reads.
    "disruption-controller",
    # Makes each pod's ResourceClaims from its ResourceClaimTemplates (DRA); without it
    # the scheduler waits for claims that never come (sandbox/devices.py).
    "resourceclaim-controller",
)


@dataclass
class Ports:
    """The loopback ports of one sandbox, picked free when it starts."""

    etcd_client: int = field(default_factory=free_port)
    etcd_peer: int = field(default_factory=free_port)
    apiserver: int = field(default_factory=free_port)
    controller_manager: int = field(default_factory=free_port)
    scheduler: int = field(default_factory=free_port)
    gangkeeper: int = field(default_factory=free_port)
    #: The gang controller's own `serve --controller-only` (/healthz, /metrics).
    gangkeeper_controller: int = field(default_factory=free_port)


@dataclass(frozen=True)
class SchedulerClient:
    """kube-scheduler's API client rate limit (`clientConnection.qps` and `burst`).

    Its defaults, 50 requests/s and a burst of 100, bound how fast a released gang
    binds: every binding is one request, so a 1,000-pod gang needs about 18 s after its
    gates lift however fast the scheduler decides. `bench.scheduler_binding` measures
    both; the operator guide says what to set.
    """

    qps: float
    burst: int


def scheduler_config(kubeconfig: Path, client: SchedulerClient) -> dict[str, object]:
    """A KubeSchedulerConfiguration with `client`'s rate limit. With `--config` the
    scheduler reads its kubeconfig and leader election from the file, not the flags."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {
            "kubeconfig": str(kubeconfig), "qps": client.qps, "burst": client.burst,
        },
        "leaderElection": {"leaderElect": False},
    }


def gates_flag(gates: Mapping[str, bool]) -> str:
    """`--feature-gates` as every component takes it."""
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))


class ControlPlane:
    """Starts the control-plane processes of one sandbox directory."""

    def __init__(
        self,
        processes: Processes,
        directory: Path,
        binaries: Binaries,
        feature_gates: Mapping[str, bool],
        scheduler_client: SchedulerClient | None = None,
    ) -> None:
        """`scheduler_client`: kube-scheduler's client rate limit; None keeps its
        defaults (50 requests/s, burst 100), as a cluster that sets nothing has."""
        self.processes = processes
        self.directory = directory
        self.binaries = binaries
        self.feature_gates = dict(feature_gates)
        self.scheduler_client = scheduler_client

    def start_etcd(self, ports: Ports) -> None:
        client_url = f"http://127.0.0.1:{ports.etcd_client}"
        peer_url = f"http://127.0.0.1:{ports.etcd_peer}"
        self.processes.start(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=sandbox",
                f"--data-dir={self.directory / 'etcd-data'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=sandbox={peer_url}",
                # A throwaway cluster: durability is not worth the fsync latency.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

    def start_apiserver(self, ports: Ports, pki: ClusterPKI) -> None:
        argv = [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The endpoint reconciler refuses a loopback address for the `kubernetes`
            # Service; nothing in the sandbox reaches the API server through it.
            "--endpoint-reconciler-type=none",
            f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={pki.apiserver.cert}",
            f"--tls-private-key-file={pki.apiserver.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--authorization-mode=Node,RBAC",
            "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,"
            "MutatingAdmissionWebhook,ValidatingAdmissionWebhook",
            # No node-lifecycle controller runs to lift the not-ready taint it adds.
            "--disable-admission-plugins=TaintNodesByCondition",
            # It presents a client certificate to webhooks (`serve --client-ca` checks it).
            "--admission-control-config-file="
            f"{write_admission_config(self.directory / 'admission', pki.webhook_client)}",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ]
        if self.feature_gates:
            argv.append(f"--feature-gates={gates_flag(self.feature_gates)}")
        if self.feature_gates.get("GenericWorkload"):
            # Beta API groups are not served by default even with their gate on.
            argv.append("--runtime-config=scheduling.k8s.io/v1beta1=true")
        self.processes.start("kube-apiserver", argv)

    def start_controller_manager(self, ports: Ports, pki: ClusterPKI, kubeconfig: Path) -> None:
        argv = [
            str(self.binaries.kube_controller_manager),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            f"--cert-dir={self.directory / 'pki' / 'controller-manager-serving'}",
            f"--controllers={','.join(KCM_CONTROLLERS)}",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca.cert}",
            # Each controller acts as its own ServiceAccount, as in a real cluster.
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            "--v=1",
        ]
        if self.feature_gates:
            argv.append(f"--feature-gates={gates_flag(self.feature_gates)}")
        self.processes.start("kube-controller-manager", argv)

    def start_scheduler(self, ports: Ports, kubeconfig: Path) -> None:
        argv = [
            str(self.binaries.kube_scheduler),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            f"--cert-dir={self.directory / 'pki' / 'scheduler-serving'}",
            "--v=1",
        ]
        if self.scheduler_client is None:
            argv.append("--leader-elect=false")
        else:
            config = self.directory / "kube-scheduler-config.yaml"
            config.write_text(
                yaml.safe_dump(scheduler_config(kubeconfig, self.scheduler_client)),
                encoding="utf-8",
            )
            argv.append(f"--config={config}")
        if self.feature_gates:
            argv.append(f"--feature-gates={gates_flag(self.feature_gates)}")
        self.processes.start("kube-scheduler", argv)
