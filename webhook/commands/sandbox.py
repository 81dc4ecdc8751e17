"""`gangkeeper sandbox` (not yet implemented)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "sandbox", help="sandbox (not yet implemented)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print("gangkeeper sandbox: not implemented yet", file=sys.stderr)
    return 2
