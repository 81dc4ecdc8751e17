"""One name per thing across the commands: the cert mode is `self` (the old
`self-managed` still works, with a warning), and the commands that talk to a cluster
take kubectl's flags for it."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from gangkeeper.webhook.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "examples" / "fleet.yaml"
#: kubectl's flags each cluster-reading command takes, as kubectl spells them.
KUBECTL_FLAGS = {
    "status": {"-n", "--namespace", "-A", "--all-namespaces", "--context", "--kubeconfig"},
    "ungate": {"-n", "--namespace", "-A", "--all-namespaces", "--context", "--kubeconfig"},
    "explain": {"-n", "--namespace", "--context", "--kubeconfig"},
    "check": {"-n", "--namespace", "--context", "--kubeconfig"},
    "serve": {"-n", "--namespace", "--context", "--kubeconfig"},
    "view": {"-n", "--namespace", "-A", "--all-namespaces", "--context", "--kubeconfig"},
}
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: here
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: me
  user: {token: t}
contexts:
- name: here
  context: {cluster: here, user: me}
current-context: here
"""


def gangkeeper(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", *args], cwd=ROOT,
        capture_output=True, text=True, timeout=60, check=False,
    )


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command and sub-command (`sandbox up`) by its name as typed."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found[f"{prefix}{name}"] = child
                    walk(child, f"{prefix}{name} ")

    walk(build_parser(), "")
    return found


def options(command: str) -> set[str]:
    return {s for a in commands()[command]._actions for s in a.option_strings}


@pytest.mark.parametrize("command", sorted(KUBECTL_FLAGS))
def test_cluster_commands_take_kubectls_flags(command: str) -> None:
    assert KUBECTL_FLAGS[command] <= options(command)


def test_every_namespace_flag_has_kubectls_short_form() -> None:
    # kubectl spells it -n everywhere; a command that takes --namespace without -n
    # (certs did) makes a user's muscle memory an error.
    missing = {name for name in commands()
               if "--namespace" in options(name) and "-n" not in options(name)}
    assert missing == set()


def test_every_command_that_reads_a_cluster_is_in_the_table() -> None:
    # A new command with --kubeconfig must be held to kubectl's flags as well.
    reading = {name for name in commands() if "--kubeconfig" in options(name)}
    assert reading == set(KUBECTL_FLAGS)


@pytest.mark.parametrize(
    "command", ["status", "explain pod/x", "ungate --dry-run", "view", "check -f examples"]
)
def test_context_picks_a_context_of_the_kubeconfig(tmp_path: Path, command: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    proc = gangkeeper(*command.split(), "--kubeconfig", str(kubeconfig), "--context", "elsewhere")
    assert proc.returncode == 2
    assert "elsewhere" in proc.stderr, proc.stderr
    assert "unrecognized arguments" not in proc.stderr and "Traceback" not in proc.stderr


def test_cert_mode_self_is_the_name_serve_takes(tmp_path: Path) -> None:
    proc = gangkeeper("serve", "--port", "1", "--nodes", str(FLEET), "--cert-mode", "self",
                      "--cert-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "--cert-mode self needs a cluster" in proc.stderr, proc.stderr
    assert "deprecated" not in proc.stderr


def test_cert_mode_self_managed_still_works_with_a_deprecation_warning(tmp_path: Path) -> None:
    proc = gangkeeper("serve", "--port", "1", "--nodes", str(FLEET),
                      "--cert-mode", "self-managed", "--cert-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "--cert-mode self-managed is deprecated; use --cert-mode self" in proc.stderr
    assert "--cert-mode self needs a cluster" in proc.stderr, proc.stderr


def test_manifests_and_serve_name_the_cert_modes_alike() -> None:
    from gangkeeper.webhook.install import CERT_MODES

    sub = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    serve_modes = next(
        a.choices for a in sub.choices["serve"]._actions if "--cert-mode" in a.option_strings
    )
    assert serve_modes is not None
    assert set(CERT_MODES) <= set(serve_modes)
