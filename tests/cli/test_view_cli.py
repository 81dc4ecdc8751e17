"""`gangkeeper view` on the command line: offered by `kubectl gangkeeper` too, kubectl's
flags for the cluster, and a port already taken is a clear error (exit 2)."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

from gangkeeper.webhook.cli.main import KUBECTL_COMMANDS, build_parser


def options(parser: argparse.ArgumentParser, command: str) -> set[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {s for a in sub.choices[command]._actions for s in a.option_strings}


def test_view_is_a_command_of_gangkeeper_and_of_kubectl_gangkeeper() -> None:
    wanted = {"-n", "--namespace", "-A", "--all-namespaces", "--context", "--kubeconfig",
              "--config", "--port", "--refresh", "--open"}
    assert wanted <= options(build_parser(), "view")
    assert wanted <= options(build_parser("kubectl gangkeeper", KUBECTL_COMMANDS), "view")


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: here, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: me, user: {token: t}}]
contexts: [{name: here, context: {cluster: here, user: me}}]
current-context: here
"""


def test_a_port_in_use_is_refused_with_exit_2(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "gangkeeper.webhook.cli", "view", "--port", str(port)],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
                 "KUBECONFIG": str(kubeconfig)},
        )
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_fleet_nodes_below_one_is_refused_with_exit_2_naming_the_flag(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "view", "--fleet-nodes", "0"],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
             "KUBECONFIG": str(kubeconfig)},
    )
    assert done.returncode == 2, done.stderr
    assert "--fleet-nodes must be at least 1, not 0" in done.stderr
    assert "Traceback" not in done.stderr
