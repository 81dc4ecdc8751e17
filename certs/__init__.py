"""gangkeeper.certs: the webhook's CA and serving certificate, issued and renewed.

May use `cryptography`, the `kubernetes` client (only in `incluster.py`, for the Secret
and the caBundle injection) and the standard library; never imports `gangkeeper.webhook`.

- `issue.py`: pure issuing and renewal decisions on PEM bytes (the numbers live there);
- `local.py`: files in a directory (`gangkeeper serve` without a cluster, `gangkeeper
  certs`, the sandbox);
- `incluster.py`: a Secret shared by the replicas, files for the server, and the caBundle
  injected into gangkeeper's own webhook configurations.
In cert-manager mode none of this runs: the server only reads the mounted files.
"""

from .incluster import (
    CertSyncError,
    ClientCalls,
    KubeCalls,
    SelfManagedCerts,
)
from .issue import (
    CA_LIFETIME,
    RENEW_FRACTION,
    SERVING_LIFETIME,
    CertificateError,
    Material,
    service_dns_names,
)
from .local import CertPaths, certificate_not_after, ensure_local

__all__ = [
    "CA_LIFETIME",
    "RENEW_FRACTION",
    "SERVING_LIFETIME",
    "CertPaths",
    "CertSyncError",
    "CertificateError",
    "ClientCalls",
    "KubeCalls",
    "Material",
    "SelfManagedCerts",
    "certificate_not_after",
    "ensure_local",
    "service_dns_names",
]
