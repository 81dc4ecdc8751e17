"""The `gangkeeper` command line: `main` and one module per sub-command (see main.py)."""

from __future__ import annotations

from .main import build_parser, kubectl_main, main

__all__ = ["build_parser", "kubectl_main", "main"]
