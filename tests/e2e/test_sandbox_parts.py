"""The sandbox's parts: PKI, processes, binaries, CLI errors, port collisions.

All but the last run everywhere (no binaries needed), so a broken certificate or a
process that `down` cannot find is caught before the slow end-to-end run; the port
collision test starts a bare control plane (no gangkeeper, no nodes).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gangkeeper.webhook.sandbox import (
    BUILD_COMMAND,
    BinariesMissing,
    Sandbox,
    find_binaries,
    gpu_node,
)
from gangkeeper.webhook.sandbox import sandbox as sandbox_module
from gangkeeper.webhook.sandbox.pki import create_pki
from gangkeeper.webhook.sandbox.processes import Processes

ACCOUNT = ("gangkeeper-system", "gangkeeper")

def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_api_server_certificate_is_valid_for_loopback_and_the_in_cluster_names(
    tmp_path: Path,
) -> None:
    pki = create_pki(tmp_path, service_ip="10.0.0.1", gangkeeper_service_account=ACCOUNT)
    cert = _cert(pki.apiserver.cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert ipaddress.ip_address("10.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage
    assert cert.issuer == _cert(pki.ca.cert).subject


@pytest.mark.parametrize(
    ("component", "common_name", "groups"),
    [
        ("admin", "gangkeeper-sandbox-admin", ["system:masters"]),
        (
            "gangkeeper",
            "system:serviceaccount:gangkeeper-system:gangkeeper",
            ["system:serviceaccounts", "system:serviceaccounts:gangkeeper-system"],
        ),
        ("controller_manager", "system:kube-controller-manager", []),
        ("scheduler", "system:kube-scheduler", []),
    ],
)
def test_each_component_gets_the_client_identity_rbac_bootstrap_policy_binds(
    tmp_path: Path, component: str, common_name: str, groups: list[str]
) -> None:
    pki = create_pki(tmp_path, service_ip="10.0.0.1", gangkeeper_service_account=ACCOUNT)
    pair = getattr(pki, component)
    cert = _cert(pair.cert)
    subject = cert.subject
    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == common_name
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == groups
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage
    assert pair.key.stat().st_mode & 0o077 == 0, "private key readable by others"


def test_a_process_started_by_one_handle_is_stopped_by_another_through_its_pid_file(
    tmp_path: Path,
) -> None:
    started = Processes(tmp_path)
    record = started.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    assert started.alive("sleeper")

    other = Processes(tmp_path)  # as `sandbox down` in a later command would
    time.sleep(0.3)  # let the child exec, so /proc shows its own command line
    assert other.alive("sleeper")
    other.stop("sleeper")

    assert not other.alive("sleeper")
    assert not (tmp_path / "pids" / "sleeper.pid").exists()
    ps = subprocess.run(
        ["ps", "-p", str(record.pid), "-o", "stat="], capture_output=True, text=True, check=False
    )
    assert ps.stdout.strip()[:1] in ("", "Z"), "process still running"
    started.stop("sleeper")  # idempotent; reaps the child this handle started


def test_a_pid_now_running_something_else_is_not_treated_as_the_component(tmp_path: Path) -> None:
    procs = Processes(tmp_path)
    procs.start("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.3)
    pid_file = tmp_path / "pids" / "sleeper.pid"
    # Same PID, different recorded command: what a reused PID looks like from /proc.
    pid_file.write_text(pid_file.read_text().replace("time.sleep(60)", "time.sleep(61)"))

    assert not Processes(tmp_path).alive("sleeper")
    procs.stop_all()


def test_missing_binaries_name_the_build_command_and_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "etcd").chmod(0o755)

    with pytest.raises(BinariesMissing) as raised:
        find_binaries(tmp_path)

    message = str(raised.value)
    assert BUILD_COMMAND in message
    assert "kube-apiserver" in message
    assert "etcd," not in message


def test_a_gpu_node_offers_its_gpus_in_capacity_and_allocatable() -> None:
    node = gpu_node("n-0", 8, labels={"pool": "a"}, taints=[{"key": "k", "effect": "NoSchedule"}])

    assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["labels"]["pool"] == "a"
    assert node["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]


@pytest.mark.parametrize("option", ["--fleet", "--config"])
def test_sandbox_up_with_a_missing_file_exits_2_naming_the_option_and_file(
    tmp_path: Path, option: str
) -> None:
    missing = tmp_path / "nope.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "sandbox", "up", option, str(missing),
         "--dir", str(tmp_path / "sb")],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip

    assert done.returncode == 2
    assert option in done.stderr
    assert str(missing) in done.stderr
    assert not (tmp_path / "sb").exists(), "a refused `up` created state"


def test_sandbox_down_on_a_directory_without_a_sandbox_succeeds_and_keeps_other_files(
    tmp_path: Path,
) -> None:
    keep = tmp_path / "notes.txt"
    keep.write_text("mine")

    done = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "sandbox", "down", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert keep.read_text() == "mine"


@pytest.mark.parametrize("gates", ["GenericWorkload", "GenericWorkload=yes", "=true"])
def test_sandbox_up_with_malformed_feature_gates_exits_2_naming_the_option_and_item(
    tmp_path: Path, gates: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "sandbox", "up",
         "--feature-gates", gates, "--dir", str(tmp_path / "sb")],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip

    assert done.returncode == 2
    assert "--feature-gates" in done.stderr
    assert repr(gates) in done.stderr
    assert not (tmp_path / "sb").exists()


@pytest.mark.e2e
def test_a_port_taken_between_probe_and_bind_is_retried_with_new_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        find_binaries()
    except BinariesMissing as e:
        if os.environ.get("GANGKEEPER_E2E", "").lower() == "require":
            pytest.fail(f"GANGKEEPER_E2E=require: {e}")
        pytest.skip(str(e))
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    taken = blocker.getsockname()[1]
    attempts: list[object] = []

    class FirstAttemptCollides(sandbox_module.Ports):
        # What losing the race looks like: the probed port is someone else's by now.
        def __init__(self) -> None:
            super().__init__()
            if not attempts:
                self.apiserver = taken
            attempts.append(self)

    monkeypatch.setattr(sandbox_module, "Ports", FirstAttemptCollides)
    sandbox = Sandbox(tmp_path / "sb")
    try:
        info = sandbox.up(fleet=None, gangkeeper=False)

        assert len(attempts) == 2
        assert info.server != f"https://127.0.0.1:{taken}"
        assert sandbox.kubectl("get", "--raw", "/readyz").stdout == "ok"
    finally:
        sandbox.down()
        blocker.close()
