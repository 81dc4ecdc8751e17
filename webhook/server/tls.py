"""The server's TLS: an SSL context (TLS 1.2 minimum) whose certificate can be swapped live.

`ReloadingTLS(cert_file, key_file)` builds the context uvicorn listens with and polls
the two files by content hash (`poll()`); when they change it loads the new pair into a
fresh context and makes new handshakes use it. Connections already open keep the
certificate they negotiated with, so renewing never fails a request in flight.

Why a swap through the SNI callback, and not `load_cert_chain` on the live context:
loading a certificate that does not match its key leaves an OpenSSL context with the new
certificate and the old key, i.e. broken for every later handshake. Building a separate
context first means a half-written pair (certificate already renewed, key not yet) is
simply ignored until both files agree. The callback runs for every ClientHello, with or
without SNI, and only assigns an attribute.

With `client_ca`, every context asks the client for a certificate and verifies one
that is sent against that CA (CERT_OPTIONAL: the kubelet's probes and Prometheus send
none); whether the admission endpoints then insist on one is the app's decision, from
the verified name the protocol puts in the request scope (`limits`).

May read the certificate files (and the client CA) and nothing else; no network, no HTTP.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

from gangkeeper.policies.errors import CertificateUnavailable as CertificateUnavailable

log = logging.getLogger(__name__)


def _context(cert_file: Path, key_file: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # The API server speaks HTTP/1.1 to webhooks; advertising it keeps ALPN honest.
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(str(cert_file), str(key_file))
    except (OSError, ssl.SSLError) as exc:
        raise CertificateUnavailable(
            f"cannot load certificate {cert_file} with key {key_file}: {exc}"
        ) from exc
    if client_ca is not None:
        # On every context, the listening one and each reloaded one the SNI callback
        # switches to: the switch keeps the verify mode but reads this CA store.
        context.verify_mode = ssl.CERT_OPTIONAL
        try:
            context.load_verify_locations(cafile=str(client_ca))
        except (OSError, ssl.SSLError) as exc:
            raise CertificateUnavailable(f"cannot load client CA {client_ca}: {exc}") from exc
    return context


def _digest(*files: Path) -> str:
    hasher = hashlib.sha256()
    for file in files:
        try:
            hasher.update(file.read_bytes())
        except OSError:
            hasher.update(b"<missing>")
        hasher.update(b"\0")
    return hasher.hexdigest()


@dataclass(frozen=True)
class LoadedCertificate:
    digest: str
    context: ssl.SSLContext


class ReloadingTLS:
    """A server SSL context that follows the certificate files on disk."""

    def __init__(self, cert_file: Path, key_file: Path, client_ca: Path | None = None) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.client_ca = client_ca
        self._lock = threading.Lock()
        digest = _digest(cert_file, key_file)
        self._current = LoadedCertificate(digest, _context(cert_file, key_file, client_ca))
        self._seen_digest = digest
        self.reloads = 0
        # The context the listening socket is bound to; it only dispatches to the current one.
        self.server_context = _context(cert_file, key_file, client_ca)
        self.server_context.sni_callback = self._select

    def _select(
        self, connection: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        connection.context = self._current.context

    def poll(self) -> bool:
        """Reload when the files' content changed; True when a new certificate is live."""
        digest = _digest(self.cert_file, self.key_file)
        with self._lock:
            if digest in (self._current.digest, self._seen_digest):
                return False
            self._seen_digest = digest
            try:
                context = _context(self.cert_file, self.key_file, self.client_ca)
            except CertificateUnavailable as exc:
                # Typically the certificate was written and the key is about to be:
                # keep serving the old pair and retry when the content changes again.
                log.warning("certificate reload deferred", extra={"error": str(exc)})
                return False
            # If the files changed again between hashing and loading, the next poll
            # sees a digest it has not loaded and reloads once more: harmless.
            self._current = LoadedCertificate(digest, context)
            self._seen_digest = digest
            self.reloads += 1
        log.info("certificate reloaded", extra={"cert_file": str(self.cert_file)})
        return True
