"""Local files mode: a CA and serving certificate kept in a directory.

Used by `gangkeeper serve` without a cluster, by `gangkeeper certs`, and by the sandbox.
Touches only the given directory: `ca.crt` (the CA bundle, signing CA first), `ca.key`
(the signing CA's key, so the serving certificate can be renewed without changing the
CA), `tls.crt` and `tls.key`. Keys are written 0600. No network, no Kubernetes.

Files are replaced atomically (write to a temporary file, then rename), and a lock file
serialises concurrent callers, so a server polling `tls.crt`/`tls.key` never reads half a
file and two processes starting together agree on one CA.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .issue import Material, not_after, renew

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"
_LOCK = ".gangkeeper-certs.lock"


@dataclass(frozen=True)
class CertPaths:
    """Where the trust bundle, serving certificate and its key are."""

    ca_cert: Path
    cert: Path
    key: Path


def paths_in(cert_dir: Path) -> CertPaths:
    return CertPaths(cert_dir / CA_CERT, cert_dir / TLS_CERT, cert_dir / TLS_KEY)


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Replace `path` with `data` in one rename; no reader sees a partial file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@contextmanager
def _locked(cert_dir: Path) -> Iterator[None]:
    with open(cert_dir / _LOCK, "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def read_material(cert_dir: Path) -> Material | None:
    """The four files as Material, or None when any is missing."""
    parts = [_read(cert_dir / name) for name in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)]
    if any(p is None for p in parts):
        return None
    ca_bundle, ca_key, cert, key = (p or b"" for p in parts)
    return Material(ca_bundle, ca_key, cert, key)


def write_material(cert_dir: Path, material: Material, *, with_ca_key: bool = True) -> None:
    """Write what differs. The key goes before its certificate: a server reloading on a
    change of `tls.crt` then finds the matching key already in place."""
    files = [
        (TLS_KEY, material.key, 0o600),
        (TLS_CERT, material.cert, 0o644),
        (CA_CERT, material.ca_bundle, 0o644),
    ]
    if with_ca_key:
        files.insert(0, (CA_KEY, material.ca_key, 0o600))
    for name, data, mode in files:
        if _read(cert_dir / name) != data:
            write_atomic(cert_dir / name, data, mode)


def ensure_local(
    cert_dir: Path,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = (),
    *,
    now: datetime | None = None,
) -> CertPaths:
    """Make `cert_dir` hold a CA and a serving certificate for these names; return paths.

    Creates them when absent, unreadable, not covering the names, or within the renewal
    window (see `issue.py` for the numbers); otherwise reuses the files untouched.
    """
    cert_dir = Path(cert_dir)
    cert_dir.mkdir(parents=True, exist_ok=True)
    when = now or datetime.now(UTC)
    with _locked(cert_dir):
        current = read_material(cert_dir)
        wanted = renew(current, dns_names, ip_addresses, when)
        if wanted is not current:
            write_material(cert_dir, wanted)
    return paths_in(cert_dir)


def certificate_not_after(path: Path) -> datetime:
    """Expiry (UTC) of the first certificate in a PEM file (for the expiry metric)."""
    return not_after(Path(path).read_bytes(), str(path))
