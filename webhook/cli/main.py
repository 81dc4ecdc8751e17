"""The `gangkeeper` command line: one sub-command per module of this package.

Each command module exposes `register(subparsers)`, which adds its parser and sets
`run` as the handler; `run(args) -> int` returns the exit code. Command modules keep
heavy imports (kubernetes, uvicorn) inside `run`, so `gangkeeper --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

COMMANDS = ("serve", "check", "certs", "manifests", "sandbox", "status")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gangkeeper",
        description="All-or-nothing admission for distributed training on Kubernetes.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"gangkeeper.webhook.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code

