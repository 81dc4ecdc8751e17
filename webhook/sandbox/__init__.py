"""The local control plane behind `gangkeeper sandbox` and the end-to-end tests.

Real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
`gangkeeper serve` processes on loopback, with the neighbours users run beside
gangkeeper (kwok playing the kubelet of fake GPU Nodes, the JobSet,
LeaderWorkerSet and Kubeflow Trainer controllers with their webhooks, the
scheduler-plugins Coscheduling scheduler beside kube-scheduler). Everything here starts processes
or talks to the API server it started; the policy core is never imported from here
except through the CLI it runs.
"""

from .binaries import (
    BUILD_COMMAND,
    CERT_MANAGER_VERSION,
    HELM_VERSION,
    PROVISIONING_REQUEST_VERSION,
    Binaries,
    BinariesMissing,
    find_binaries,
    find_cert_manager_crds,
    find_helm,
    find_provisioning_request_crd,
)
from .control_plane import SchedulerClient
from .errors import SandboxError
from .neighbours import ALL_COMPONENTS, parse_components
from .nodes import create_nodes, delete_nodes, fleet_of, gpu_node
from .sandbox import DEFAULT_FEATURE_GATES, DEFAULT_FLEET, Sandbox, SandboxInfo

__all__ = [
    "ALL_COMPONENTS",
    "BUILD_COMMAND",
    "CERT_MANAGER_VERSION",
    "DEFAULT_FEATURE_GATES",
    "DEFAULT_FLEET",
    "HELM_VERSION",
    "PROVISIONING_REQUEST_VERSION",
    "Binaries",
    "BinariesMissing",
    "Sandbox",
    "SandboxError",
    "SandboxInfo",
    "SchedulerClient",
    "create_nodes",
    "delete_nodes",
    "find_binaries",
    "find_cert_manager_crds",
    "find_helm",
    "find_provisioning_request_crd",
    "fleet_of",
    "gpu_node",
    "parse_components",
]
