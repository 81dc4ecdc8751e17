"""`gangkeeper manifests` (not yet implemented)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "manifests", help="manifests (not yet implemented)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print("gangkeeper manifests: not implemented yet", file=sys.stderr)
    return 2
