"""The `gangkeeper` command line: one sub-command per module of this package.

Each command module exposes `register(subparsers)`, which adds its parser and sets
`run` as the handler; `run(args) -> int` returns the exit code. Command modules keep
heavy imports (kubernetes, uvicorn) inside `run`, so `gangkeeper --help` stays fast.

What every command shares is here: `--version`, and output piped into a reader that
stops early (`gangkeeper check ... | head`) ending quietly. Touches only stdout.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tomllib
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from .exit_codes import EXIT_BROKEN_PIPE

COMMANDS = ("serve", "check", "certs", "manifests", "sandbox", "status", "ungate", "explain",
            "view")
#: What `kubectl gangkeeper ...` offers (kubectl's plugin convention: an executable
#: `kubectl-gangkeeper` on PATH): the commands that read the cluster kubectl points at.
KUBECTL_COMMANDS = ("status", "check", "explain", "view")


def build_parser(
    prog: str = "gangkeeper", commands: Sequence[str] = COMMANDS
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="All-or-nothing admission for distributed training on Kubernetes.",
    )
    parser.add_argument(
        "--version", action="version", version=f"gangkeeper {version()}",
        help="print gangkeeper's version and exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in commands:
        module = importlib.import_module(f"gangkeeper.webhook.cli.{name}")
        module.register(sub)
        command = sub.choices[name]
        # Commands name themselves in errors as typed (`kubectl gangkeeper check:`),
        # and an unknown flag is the sub-command's error, shown with its usage.
        command.set_defaults(command_prog=command.prog, command_parser=command)
    return parser


def version() -> str:
    """The installed package's version; a source checkout run without installing
    (`python -m` with PYTHONPATH) has no metadata, so pyproject.toml says it."""
    try:
        return metadata.version("gangkeeper")
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            found: str = tomllib.loads(pyproject.read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"
        return found


def _run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        code: int = args.run(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        # Python's documented recipe: point stdout at devnull so the flush at exit
        # does not raise again and print "Exception ignored ... BrokenPipeError".
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


def main(argv: Sequence[str] | None = None) -> int:
    return _run(build_parser(), argv)


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """The `kubectl-gangkeeper` script: `kubectl gangkeeper status|check|explain|view ...`."""
    return _run(build_parser("kubectl gangkeeper", KUBECTL_COMMANDS), argv)

