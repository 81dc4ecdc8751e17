"""The local control plane behind `gangkeeper sandbox` and the end-to-end tests.

Real etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
`gangkeeper serve` processes on loopback; fake GPU Nodes the real scheduler binds
to. Everything here starts processes or talks to the API server it started; the
policy core is never imported from here except through the CLI it runs.
"""

from .binaries import BUILD_COMMAND, Binaries, BinariesMissing, find_binaries
from .nodes import create_nodes, delete_nodes, gpu_node
from .sandbox import DEFAULT_FEATURE_GATES, DEFAULT_FLEET, Sandbox, SandboxError, SandboxInfo

__all__ = [
    "BUILD_COMMAND",
    "DEFAULT_FEATURE_GATES",
    "DEFAULT_FLEET",
    "Binaries",
    "BinariesMissing",
    "Sandbox",
    "SandboxError",
    "SandboxInfo",
    "create_nodes",
    "delete_nodes",
    "find_binaries",
    "gpu_node",
]
