"""The kubeconfigs of the sandbox's identities: admin, controller manager, scheduler
and gangkeeper's ServiceAccount.

May touch: the `kubeconfigs/` directory of one sandbox (and the admin kubeconfig path
it is given). Writes files only; talks to no server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from .pki import ClusterPKI, KeyPair

CLUSTER_NAME = "gangkeeper-sandbox"


@dataclass(frozen=True)
class Identities:
    admin: Path
    controller_manager: Path
    scheduler: Path
    gangkeeper: Path


def write_kubeconfig(path: Path, server: str, ca: Path, user: str, client: KeyPair) -> Path:
    """A kubeconfig with one cluster/user/context, files referenced by absolute path."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {"server": server, "certificate-authority": str(ca.resolve())},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(client.cert.resolve()),
                    "client-key": str(client.key.resolve()),
                },
            }
        ],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": CLUSTER_NAME,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def write_identities(
    identities: Identities, server: str, pki: ClusterPKI, gangkeeper_user: str
) -> Identities:
    """Each component's kubeconfig at the paths `identities` names."""
    ca = pki.ca.cert
    write_kubeconfig(identities.admin, server, ca, "gangkeeper-sandbox-admin", pki.admin)
    write_kubeconfig(
        identities.controller_manager,
        server,
        ca,
        "system:kube-controller-manager",
        pki.controller_manager,
    )
    write_kubeconfig(identities.scheduler, server, ca, "system:kube-scheduler", pki.scheduler)
    write_kubeconfig(identities.gangkeeper, server, ca, gangkeeper_user, pki.gangkeeper)
    return identities
