"""Issuing and judging certificates: a CA, a serving certificate, and a CA bundle.

Pure computation on PEM bytes with `cryptography`: no file, no network, no clock of its
own (every function takes `now`). `local.py` (files) and `incluster.py` (a Secret) decide
where the material lives; this module decides what it is and when it must be renewed.

Numbers, fixed here so every mode agrees:
- keys are ECDSA P-256 (small, fast handshakes, accepted by every API server);
- the CA lives 365 days, the serving certificate 90 days;
- a certificate is renewed once less than 1/3 of its lifetime remains (serving: 30 days
  before expiry; CA: ~122 days before expiry);
- a renewed CA is put first in the bundle and the previous CA stays behind it until it
  expires, so clients holding either keep trusting the server during the overlap. Serving
  certificates never outlive the CA that signed them, and the CA is renewed with more time
  left (122 d) than a serving certificate lives (90 d), so the serving certificate signed
  by the old CA expires while the old CA is still in the bundle.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gangkeeper.policies.errors import CertificateError as CertificateError

CA_LIFETIME = timedelta(days=365)
SERVING_LIFETIME = timedelta(days=90)
#: Renew when less than this fraction of a certificate's lifetime remains.
RENEW_FRACTION = 1 / 3
#: Backdating absorbs clock skew between this process and the API server.
BACKDATE = timedelta(minutes=5)
CA_COMMON_NAME = "gangkeeper-ca"


@dataclass(frozen=True)
class Material:
    """Everything a self-managed installation keeps, as PEM bytes.

    `ca_bundle` holds the signing CA first, then older CAs still trusted (overlap).
    """

    ca_bundle: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def load_certificates(pem: bytes, source: str) -> list[x509.Certificate]:
    """All certificates of a PEM blob; at least one, or CertificateError."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise CertificateError(source, f"not a PEM certificate ({exc})") from exc
    if not certs:
        raise CertificateError(source, "no certificate found")
    return certs


def load_key(pem: bytes, source: str) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(source, f"not an unencrypted PEM private key ({exc})") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateError(source, f"expected an EC private key, got {type(key).__name__}")
    return key


def _same_public_key(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def _is_signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def needs_renewal(cert: x509.Certificate, now: datetime) -> bool:
    """True when less than RENEW_FRACTION of the lifetime remains (or it is not yet valid)."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    if now < start:
        return True
    return end - now < (end - start) * RENEW_FRACTION


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def build_ca(
    name: x509.Name, key: ec.EllipticCurvePrivateKey, now: datetime, lifetime: timedelta
) -> x509.Certificate:
    """A self-signed CA certificate that may sign leaf certificates only (path length 0)."""
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def build_leaf(
    issuer: x509.Certificate,
    issuer_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    *,
    now: datetime,
    lifetime: timedelta,
    usage: x509.ObjectIdentifier,
    sans: Sequence[x509.GeneralName] = (),
) -> x509.Certificate:
    """A server or client certificate signed by `issuer`, never outliving it."""
    # Never outlive the issuer: a client would reject the chain at the CA's expiry anyway.
    not_after = min(now + lifetime, issuer.not_valid_after_utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def issue_ca(now: datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    # A random tag in the subject makes two CAs issued in the same second
    # distinguishable, which keeps old and new CA apart in a bundle and in logs.
    tag = format(x509.random_serial_number() % 2**32, "08x")
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME),
            x509.NameAttribute(NameOID.SERIAL_NUMBER, tag),
        ]
    )
    return build_ca(name, key, now, CA_LIFETIME), key


def san_entries(dns_names: Sequence[str], ip_addresses: Sequence[str]) -> list[x509.GeneralName]:
    """Subject alternative names for these DNS names and IPs; CertificateError names a bad one."""
    entries: list[x509.GeneralName] = []
    for name in dns_names:
        if not name or not name.isascii() or any(c.isspace() for c in name):
            raise CertificateError("dns_names", f"{name!r} is not an ASCII DNS name")
        entries.append(x509.DNSName(name))
    for raw in ip_addresses:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(raw)))
        except ValueError as exc:
            raise CertificateError("ip_addresses", f"{raw!r} is not an IP address") from exc
    return entries


def issue_serving(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
    now: datetime,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    if not dns_names and not ip_addresses:
        raise CertificateError("dns_names", "a serving certificate needs at least one name")
    sans = san_entries(dns_names, ip_addresses)
    key = _new_key()
    common_name = dns_names[0] if dns_names else ip_addresses[0]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    cert = build_leaf(
        ca_cert,
        ca_key,
        subject,
        key,
        now=now,
        lifetime=SERVING_LIFETIME,
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=sans,
    )
    return cert, key


def covers(cert: x509.Certificate, dns_names: Sequence[str], ip_addresses: Sequence[str]) -> bool:
    """Whether the certificate's SANs include every requested name and address."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    have_dns = set(san.get_values_for_type(x509.DNSName))
    have_ip = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    want_ip = {str(ipaddress.ip_address(ip)) for ip in ip_addresses}
    return set(dns_names) <= have_dns and want_ip <= have_ip


def _bundle(signer: x509.Certificate, older: Sequence[x509.Certificate], now: datetime) -> bytes:
    kept = [signer]
    for cert in older:
        # Drop expired CAs and duplicates of the signer; keep the rest for the overlap.
        if cert.not_valid_after_utc > now and cert.fingerprint(hashes.SHA256()) != (
            signer.fingerprint(hashes.SHA256())
        ):
            kept.append(cert)
    return b"".join(_cert_pem(c) for c in kept)


def _valid_current(
    material: Material, now: datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey, list[x509.Certificate]]:
    """Parse stored material; raise CertificateError when it cannot be reused at all."""
    bundle = load_certificates(material.ca_bundle, "ca.crt")
    ca_key = load_key(material.ca_key, "ca.key")
    signer = bundle[0]
    if not _same_public_key(signer, ca_key):
        raise CertificateError("ca.key", "does not match the first certificate of ca.crt")
    if signer.not_valid_after_utc <= now:
        raise CertificateError("ca.crt", "the CA has expired")
    return signer, ca_key, bundle[1:]


def _serving_ok(
    material: Material,
    signer: x509.Certificate,
    bundle: Sequence[x509.Certificate],
    *,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
    now: datetime,
) -> bool:
    try:
        cert = load_certificates(material.cert, "tls.crt")[0]
        key = load_key(material.key, "tls.key")
    except CertificateError:
        return False
    trusted = [signer, *bundle]
    return (
        _same_public_key(cert, key)
        and any(_is_signed_by(cert, ca) for ca in trusted)
        and not needs_renewal(cert, now)
        and covers(cert, dns_names, ip_addresses)
    )


def renew(
    material: Material | None,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
    now: datetime,
) -> Material:
    """The material to use from now on: `material` itself when still good, else renewed.

    - absent or unreadable CA → a fresh CA and serving certificate;
    - CA in its renewal window → a new CA first in the bundle, the old one kept behind it;
      the serving certificate is left alone when still good (it is signed by a CA that
      stays trusted until after it expires) so clients see the new CA before any
      certificate signed by it;
    - serving certificate missing, unreadable, not covering the names, or in its window
      → a new one signed by the current CA.
    Returns the identical object when nothing changed, so callers can skip writes.
    """
    if material is not None:
        try:
            signer, ca_key, older = _valid_current(material, now)
        except CertificateError:
            material = None
    if material is None:
        ca_cert, ca_key_new = issue_ca(now)
        cert, key = issue_serving(ca_cert, ca_key_new, dns_names, ip_addresses, now)
        return Material(_cert_pem(ca_cert), _key_pem(ca_key_new), _cert_pem(cert), _key_pem(key))

    changed = False
    bundle_pem = material.ca_bundle
    ca_key_pem = material.ca_key
    trusted_older = older
    if needs_renewal(signer, now):
        new_ca, ca_key = issue_ca(now)
        trusted_older = [signer, *older]
        bundle_pem = _bundle(new_ca, trusted_older, now)
        ca_key_pem = _key_pem(ca_key)
        signer = new_ca
        changed = True
    elif any(c.not_valid_after_utc <= now for c in older):
        bundle_pem = _bundle(signer, older, now)
        changed = True

    cert_pem, key_pem = material.cert, material.key
    if not _serving_ok(
        material,
        signer,
        trusted_older,
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        now=now,
    ):
        cert, key = issue_serving(signer, ca_key, dns_names, ip_addresses, now)
        cert_pem, key_pem = _cert_pem(cert), _key_pem(key)
        changed = True
    if not changed:
        return material
    return Material(bundle_pem, ca_key_pem, cert_pem, key_pem)


def not_after(pem: bytes, source: str) -> datetime:
    """Expiry (UTC) of the first certificate in a PEM blob."""
    return load_certificates(pem, source)[0].not_valid_after_utc


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server uses to reach a webhook Service."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc"]
