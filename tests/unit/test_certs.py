"""Certificates: issue, reuse, renewal windows, CA overlap, files, and in-cluster reconcile.

Time is passed in explicitly (`now=` / a clock), so "90 days later" is a parameter, not a
wait. The in-cluster part runs against a small in-memory fake of the five API calls
(`KubeCalls`); the end-to-end tests exercise the real client against a real API server.
"""

from __future__ import annotations

import base64
import copy
import socket
import ssl
import stat
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from gangkeeper.certs import (
    SERVING_LIFETIME,
    CertificateError,
    CertSyncError,
    SelfManagedCerts,
    certificate_not_after,
    ensure_local,
)
from gangkeeper.certs.incluster import Conflict, WebhookKind
from gangkeeper.webhook.cli import certs as certs_command

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NAMES = ["gangkeeper", "gangkeeper.gangkeeper-system", "gangkeeper.gangkeeper-system.svc"]
LOCAL = ["localhost"]
LOCAL_IPS = ["127.0.0.1"]


def certs_in(path: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(path.read_bytes())


def fingerprint(cert: x509.Certificate) -> bytes:
    return cert.fingerprint(hashes.SHA256())


def sans(cert: x509.Certificate) -> set[str]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(ext.get_values_for_type(x509.DNSName)) | {
        str(ip) for ip in ext.get_values_for_type(x509.IPAddress)
    }


def issuer_in_bundle(cert: x509.Certificate, bundle: list[x509.Certificate]) -> x509.Certificate:
    for ca in bundle:
        try:
            cert.verify_directly_issued_by(ca)
        except Exception:
            continue
        return ca
    raise AssertionError("serving certificate is not signed by any CA in the bundle")


# --- local files ------------------------------------------------------------------------


def test_a_fresh_directory_gets_a_ca_and_a_serving_certificate_for_the_names(
    tmp_path: Path,
) -> None:
    paths = ensure_local(tmp_path / "c", LOCAL, LOCAL_IPS, now=T0)

    cert = certs_in(paths.cert)[0]
    bundle = certs_in(paths.ca_cert)
    assert len(bundle) == 1
    assert issuer_in_bundle(cert, bundle) == bundle[0]
    assert sans(cert) == {"localhost", "127.0.0.1"}
    assert cert.not_valid_after_utc - cert.not_valid_before_utc >= SERVING_LIFETIME
    assert bundle[0].extensions.get_extension_for_class(x509.BasicConstraints).value.ca


@pytest.mark.parametrize("name", ["tls.key", "ca.key"])
def test_private_keys_are_readable_only_by_the_owner(tmp_path: Path, name: str) -> None:
    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0)
    assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("days_later", "renewed"),
    [
        (1, False),
        (59, False),  # 31 days left of 90: more than a third
        (61, True),  # 29 days left: inside the window
        (100, True),  # expired
    ],
)
def test_the_serving_certificate_is_renewed_only_in_its_last_third(
    tmp_path: Path, days_later: int, renewed: bool
) -> None:
    paths = ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0)
    before = paths.cert.read_bytes(), paths.ca_cert.read_bytes()

    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0 + timedelta(days=days_later))

    assert (paths.cert.read_bytes() != before[0]) is renewed
    # Renewing the serving certificate alone never changes the CA.
    assert paths.ca_cert.read_bytes() == before[1]


def test_a_renewed_ca_is_trusted_alongside_the_old_one_until_the_old_one_expires(
    tmp_path: Path,
) -> None:
    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0)
    old_ca = certs_in(tmp_path / "ca.crt")[0]
    # Day 200: a routine serving renewal, still signed by the first CA.
    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0 + timedelta(days=200))
    serving_200 = (tmp_path / "tls.crt").read_bytes()

    # Day 250: the CA has less than a third of its year left and is renewed.
    paths = ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0 + timedelta(days=250))
    bundle = certs_in(paths.ca_cert)
    assert len(bundle) == 2
    assert fingerprint(bundle[1]) == fingerprint(old_ca)
    assert fingerprint(bundle[0]) != fingerprint(old_ca)
    # The serving certificate (40 days left) is kept: clients learn the new CA first.
    assert paths.cert.read_bytes() == serving_200
    assert issuer_in_bundle(certs_in(paths.cert)[0], bundle) == bundle[1]

    # Day 265: the serving certificate is due and is now signed by the new CA.
    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0 + timedelta(days=265))
    cert = certs_in(paths.cert)[0]
    assert fingerprint(issuer_in_bundle(cert, certs_in(paths.ca_cert))) == fingerprint(bundle[0])

    # Day 366: the old CA has expired and leaves the bundle.
    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0 + timedelta(days=366))
    assert [fingerprint(c) for c in certs_in(paths.ca_cert)] == [fingerprint(bundle[0])]


def test_a_serving_certificate_never_outlives_the_ca_that_signed_it(tmp_path: Path) -> None:
    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0)
    # Day 240: serving due (issued day 0 expired), CA not yet due (125 days left).
    paths = ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0 + timedelta(days=240))
    cert, ca = certs_in(paths.cert)[0], certs_in(paths.ca_cert)[0]
    assert cert.not_valid_after_utc <= ca.not_valid_after_utc


def test_new_names_get_a_new_certificate_signed_by_the_same_ca(tmp_path: Path) -> None:
    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0)
    ca_before = (tmp_path / "ca.crt").read_bytes()

    paths = ensure_local(tmp_path, [*LOCAL, "gk.example"], LOCAL_IPS, now=T0)

    assert "gk.example" in sans(certs_in(paths.cert)[0])
    assert paths.ca_cert.read_bytes() == ca_before


def test_fewer_names_than_the_certificate_has_reuse_it(tmp_path: Path) -> None:
    ensure_local(tmp_path, [*LOCAL, "gk.example"], LOCAL_IPS, now=T0)
    before = (tmp_path / "tls.crt").read_bytes()
    ensure_local(tmp_path, LOCAL, [], now=T0)
    assert (tmp_path / "tls.crt").read_bytes() == before


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("ca.crt", b"not a certificate"),
        ("ca.key", b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n"),
        ("tls.crt", b""),
        ("tls.key", b"junk"),
    ],
)
def test_unreadable_files_are_replaced_instead_of_crashing(
    tmp_path: Path, name: str, content: bytes
) -> None:
    ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0)
    (tmp_path / name).write_bytes(content)

    paths = ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0)

    issuer_in_bundle(certs_in(paths.cert)[0], certs_in(paths.ca_cert))


def test_a_certificate_from_another_ca_is_replaced(tmp_path: Path) -> None:
    ensure_local(tmp_path / "a", LOCAL, LOCAL_IPS, now=T0)
    ensure_local(tmp_path / "b", LOCAL, LOCAL_IPS, now=T0)
    for name in ("tls.crt", "tls.key"):
        (tmp_path / "a" / name).write_bytes((tmp_path / "b" / name).read_bytes())

    paths = ensure_local(tmp_path / "a", LOCAL, LOCAL_IPS, now=T0)

    issuer_in_bundle(certs_in(paths.cert)[0], certs_in(paths.ca_cert))


def test_certificate_not_after_reads_the_expiry(tmp_path: Path) -> None:
    paths = ensure_local(tmp_path, LOCAL, LOCAL_IPS, now=T0)
    assert certificate_not_after(paths.cert) == certs_in(paths.cert)[0].not_valid_after_utc
    assert certificate_not_after(paths.cert) > T0 + timedelta(days=89)


def test_certificate_not_after_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    bad = tmp_path / "broken.crt"
    bad.write_text("hello")
    with pytest.raises(CertificateError, match=r"broken\.crt"):
        certificate_not_after(bad)


def test_a_tls_client_trusting_ca_crt_completes_a_handshake_with_tls_crt(
    tmp_path: Path,
) -> None:
    paths = ensure_local(tmp_path, LOCAL, LOCAL_IPS)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(paths.cert, paths.key)
    client_ctx = ssl.create_default_context(cafile=str(paths.ca_cert))

    for host in ("localhost", "127.0.0.1"):
        with socket.create_server(("127.0.0.1", 0)) as listener:

            def serve(listener: socket.socket = listener) -> None:
                conn, _ = listener.accept()
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")

            thread = threading.Thread(target=serve, daemon=True)
            thread.start()
            with (
                socket.create_connection(listener.getsockname(), timeout=5) as raw,
                client_ctx.wrap_socket(raw, server_hostname=host) as tls,
            ):
                assert tls.recv(2) == b"ok"
            thread.join(5)


# --- gangkeeper certs ---------------------------------------------------------------------


def run_certs(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser()
    certs_command.register(parser.add_subparsers())
    args = parser.parse_args(["certs", *argv])
    code: int = args.run(args)
    return code


def test_gangkeeper_certs_defaults_to_service_names_and_loopback(tmp_path: Path) -> None:
    assert run_certs(["--dir", str(tmp_path)]) == 0
    assert sans(certs_in(tmp_path / "tls.crt")[0]) == {*NAMES, "localhost", "127.0.0.1"}


@pytest.mark.parametrize(
    "argv",
    [
        ["--dns", "a.test", "--dns", "b.test", "--ip", "10.0.0.7"],
        ["--dns", "a.test", "b.test", "--ip", "10.0.0.7"],
    ],
)
def test_gangkeeper_certs_uses_the_names_it_is_given(tmp_path: Path, argv: list[str]) -> None:
    assert run_certs(["--dir", str(tmp_path), *argv]) == 0
    assert sans(certs_in(tmp_path / "tls.crt")[0]) == {"a.test", "b.test", "10.0.0.7"}


def test_gangkeeper_certs_rejects_a_bad_ip_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_certs(["--dir", str(tmp_path), "--ip", "300.1.1.1"]) == 2
    assert "--ip '300.1.1.1'" in capsys.readouterr().err
    assert not (tmp_path / "tls.crt").exists()


@pytest.mark.parametrize("name", ["bücher.example", "two words", ""])
def test_gangkeeper_certs_rejects_a_bad_dns_name_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert run_certs(["--dir", str(tmp_path), "--dns", name]) == 2
    assert repr(name) in capsys.readouterr().err


def test_gangkeeper_certs_reports_an_unwritable_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert run_certs(["--dir", str(blocker / "sub")]) == 2
    assert "cannot write" in capsys.readouterr().err


# --- in-cluster: Secret + caBundle injection, against an in-memory fake ---------------------


class FakeCluster:
    """The five calls of `KubeCalls`, with resourceVersion checks like the API server."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.configs: dict[tuple[WebhookKind, str], dict[str, Any]] = {}
        self.version = 1000  # above any version a test seeds by hand
        self.writes: list[str] = []
        #: Called before a replace lands, to simulate another replica writing first.
        self.before_replace: list[Any] = []

    def _bump(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.secrets.get((namespace, name))
        return copy.deepcopy(found) if found else None

    def create_secret(self, namespace: str, body: dict[str, Any]) -> None:
        key = (namespace, body["metadata"]["name"])
        if key in self.secrets:
            raise Conflict("already exists")
        stored = copy.deepcopy(body)
        self._bump(stored)
        self.secrets[key] = stored
        self.writes.append("create secret")

    def replace_secret(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        hooks, self.before_replace = self.before_replace, []
        for hook in hooks:
            hook()
        current = self.secrets[(namespace, name)]
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified")
        stored = copy.deepcopy(body)
        self._bump(stored)
        self.secrets[(namespace, name)] = stored
        self.writes.append("replace secret")

    def read_webhook_configuration(self, kind: WebhookKind, name: str) -> dict[str, Any] | None:
        found = self.configs.get((kind, name))
        return copy.deepcopy(found) if found else None

    def patch_webhook_configuration(
        self, kind: WebhookKind, name: str, patch: list[dict[str, Any]]
    ) -> None:
        try:
            patched = jsonpatch.apply_patch(self.configs[(kind, name)], patch)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise Conflict(str(exc)) from exc
        self.configs[(kind, name)] = patched
        self.writes.append(f"patch {kind} {name}")

    def ca_bundles(self) -> list[str | None]:
        return [
            hook["clientConfig"].get("caBundle")
            for config in self.configs.values()
            for hook in config["webhooks"]
        ]


def webhook_config(names: list[str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "x"},
        "webhooks": [
            {"name": n, "clientConfig": {"service": {"name": "gangkeeper"}}} for n in names
        ],
    }


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def cluster() -> FakeCluster:
    fake = FakeCluster()
    fake.configs[("mutating", "gangkeeper-mutating")] = webhook_config(
        ["pods.mutate.gangkeeper.io"]
    )
    fake.configs[("validating", "gangkeeper-validating")] = webhook_config(
        ["pods.validate.gangkeeper.io", "workloads.validate.gangkeeper.io"]
    )
    return fake


def manager(cluster: FakeCluster, cert_dir: Path, clock: Clock | None = None) -> SelfManagedCerts:
    return SelfManagedCerts(
        None,
        namespace="gangkeeper-system",
        cert_dir=cert_dir,
        calls=cluster,
        clock=clock or Clock(),
    )


def secret_ca(cluster: FakeCluster) -> bytes:
    data = cluster.secrets[("gangkeeper-system", "gangkeeper-tls")]["data"]
    return base64.b64decode(data["ca.crt"])


def test_reconcile_creates_the_secret_writes_files_and_injects_every_webhook(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    manager(cluster, tmp_path).reconcile()

    ca = secret_ca(cluster)
    assert (tmp_path / "ca.crt").read_bytes() == ca
    assert not (tmp_path / "ca.key").exists(), "the CA key stays in the Secret"
    assert cluster.ca_bundles() == [base64.b64encode(ca).decode()] * 3
    cert = certs_in(tmp_path / "tls.crt")[0]
    assert sans(cert) == set(NAMES)
    issuer_in_bundle(cert, certs_in(tmp_path / "ca.crt"))


def test_a_second_reconcile_changes_nothing(cluster: FakeCluster, tmp_path: Path) -> None:
    certs = manager(cluster, tmp_path)
    certs.reconcile()
    writes = len(cluster.writes)
    certs.reconcile()
    assert cluster.writes[writes:] == []


def test_a_removed_ca_bundle_is_injected_again(cluster: FakeCluster, tmp_path: Path) -> None:
    certs = manager(cluster, tmp_path)
    certs.reconcile()
    config = cluster.configs[("validating", "gangkeeper-validating")]
    del config["webhooks"][1]["clientConfig"]["caBundle"]

    certs.reconcile()

    assert len(set(cluster.ca_bundles())) == 1
    assert None not in cluster.ca_bundles()


def test_a_secret_shipped_empty_by_the_manifests_is_filled_not_recreated(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    cluster.secrets[("gangkeeper-system", "gangkeeper-tls")] = {
        "metadata": {"name": "gangkeeper-tls", "resourceVersion": "1", "labels": {"a": "b"}},
        "type": "Opaque",
    }
    manager(cluster, tmp_path).reconcile()
    assert cluster.writes[0] == "replace secret"
    stored = cluster.secrets[("gangkeeper-system", "gangkeeper-tls")]
    assert stored["metadata"]["labels"] == {"a": "b"}


def test_replicas_converge_on_one_ca(cluster: FakeCluster, tmp_path: Path) -> None:
    manager(cluster, tmp_path / "r1").reconcile()
    manager(cluster, tmp_path / "r2").reconcile()
    assert (tmp_path / "r1" / "ca.crt").read_bytes() == (tmp_path / "r2" / "ca.crt").read_bytes()
    assert (tmp_path / "r1" / "tls.crt").read_bytes() == (tmp_path / "r2" / "tls.crt").read_bytes()


def test_a_conflicting_write_by_another_replica_wins_and_is_adopted(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    cluster.secrets[("gangkeeper-system", "gangkeeper-tls")] = {
        "metadata": {"name": "gangkeeper-tls", "resourceVersion": "1"},
        "type": "Opaque",
    }
    other = manager(cluster, tmp_path / "other")
    # Between our read and our write, the other replica fills the Secret.
    cluster.before_replace.append(other.reconcile)

    manager(cluster, tmp_path / "me").reconcile()

    ours = (tmp_path / "me" / "ca.crt").read_bytes()
    assert ours == (tmp_path / "other" / "ca.crt").read_bytes() == secret_ca(cluster)
    assert cluster.writes.count("replace secret") == 1


def test_ca_renewal_injects_old_and_new_ca_together(cluster: FakeCluster, tmp_path: Path) -> None:
    clock = Clock()
    certs = manager(cluster, tmp_path, clock)
    certs.reconcile()
    first_ca = certs_in(tmp_path / "ca.crt")[0]

    clock.now = T0 + timedelta(days=250)
    certs.reconcile()

    injected = base64.b64decode(cluster.ca_bundles()[0] or "")
    bundle = x509.load_pem_x509_certificates(injected)
    assert [fingerprint(c) for c in bundle][1:] == [fingerprint(first_ca)]
    assert len(bundle) == 2
    issuer_in_bundle(certs_in(tmp_path / "tls.crt")[0], bundle)


def test_missing_webhook_configurations_are_skipped(tmp_path: Path) -> None:
    empty = FakeCluster()
    manager(empty, tmp_path).reconcile()
    assert empty.writes == ["create secret"]


def test_endless_conflicts_end_in_an_error_naming_the_secret(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    cluster.secrets[("gangkeeper-system", "gangkeeper-tls")] = {
        "metadata": {"name": "gangkeeper-tls", "resourceVersion": "1"},
    }

    def someone_else_writes() -> None:
        cluster._bump(cluster.secrets[("gangkeeper-system", "gangkeeper-tls")])
        cluster.before_replace.append(someone_else_writes)

    cluster.before_replace.append(someone_else_writes)
    with pytest.raises(CertSyncError, match="gangkeeper-system/gangkeeper-tls"):
        manager(cluster, tmp_path).reconcile()


@pytest.mark.parametrize(
    "data",
    [
        {"ca.crt": "not base64!"},
        {"tls.crt": base64.b64encode(b"only one key").decode()},
        {
            "ca.crt": base64.b64encode(b"garbage").decode(),
            "ca.key": base64.b64encode(b"garbage").decode(),
            "tls.crt": base64.b64encode(b"garbage").decode(),
            "tls.key": base64.b64encode(b"garbage").decode(),
        },
    ],
    ids=["bad-base64", "incomplete", "unreadable-pem"],
)
def test_a_damaged_secret_is_replaced_with_working_material(
    cluster: FakeCluster, tmp_path: Path, data: dict[str, str]
) -> None:
    cluster.secrets[("gangkeeper-system", "gangkeeper-tls")] = {
        "metadata": {"name": "gangkeeper-tls", "resourceVersion": "1"},
        "data": data,
    }
    manager(cluster, tmp_path).reconcile()
    issuer_in_bundle(certs_in(tmp_path / "tls.crt")[0], certs_in(tmp_path / "ca.crt"))
    assert secret_ca(cluster) == (tmp_path / "ca.crt").read_bytes()


def test_a_webhook_entry_without_client_config_still_gets_the_bundle(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    del cluster.configs[("mutating", "gangkeeper-mutating")]["webhooks"][0]["clientConfig"]
    manager(cluster, tmp_path).reconcile()
    assert None not in cluster.ca_bundles()
