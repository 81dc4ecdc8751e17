"""`gangkeeper certs` (not yet implemented)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser("certs", help="certs (not yet implemented)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print("gangkeeper certs: not implemented yet", file=sys.stderr)
    return 2
