"""The `gangkeeper` command line: one sub-command per module of this package.

Each command module exposes `register(subparsers)`, which adds its parser and sets
`run` as the handler; `run(args) -> int` returns the exit code. Command modules keep
heavy imports (kubernetes, uvicorn) inside `run`, so `gangkeeper --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

COMMANDS = ("serve", "check", "certs", "manifests", "sandbox", "status", "ungate", "explain")
#: What `kubectl gangkeeper ...` offers (kubectl's plugin convention: an executable
#: `kubectl-gangkeeper` on PATH): the commands that read the cluster kubectl points at.
KUBECTL_COMMANDS = ("status", "check", "explain")


def build_parser(
    prog: str = "gangkeeper", commands: Sequence[str] = COMMANDS
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="All-or-nothing admission for distributed training on Kubernetes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in commands:
        module = importlib.import_module(f"gangkeeper.webhook.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """The `kubectl-gangkeeper` script: `kubectl gangkeeper status|check|explain ...`."""
    parser = build_parser("kubectl gangkeeper", KUBECTL_COMMANDS)
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code

