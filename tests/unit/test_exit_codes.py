"""The CLI's exit codes are defined once, in gangkeeper.webhook.cli.exit_codes."""

from __future__ import annotations

import ast
from pathlib import Path

import gangkeeper.certs
import gangkeeper.policies
import gangkeeper.webhook

HOME = "webhook/cli/exit_codes.py"


def assigned_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def test_no_module_but_exit_codes_assigns_an_exit_code() -> None:
    strays: list[str] = []
    for package in (gangkeeper.policies, gangkeeper.webhook, gangkeeper.certs):
        root = Path(package.__path__[0])
        for path in sorted(root.rglob("*.py")):
            where = f"{root.name}/{path.relative_to(root)}"
            if where == HOME:
                continue
            assigned = assigned_names(ast.parse(path.read_text()))
            exits = {name for name in assigned if name.startswith("EXIT_")}
            strays.extend(f"{where}: {name}" for name in sorted(exits))
    assert strays == []


def test_the_codes_are_the_ones_the_commands_document() -> None:
    from gangkeeper.webhook.cli import exit_codes

    assert (exit_codes.EXIT_OK, exit_codes.EXIT_ADMITTED) == (0, 0)
    assert {exit_codes.EXIT_REJECTED, exit_codes.EXIT_LEFT_GATED, exit_codes.EXIT_NOT_A_GANG} == {1}
    assert exit_codes.EXIT_BAD_INPUT == 2
