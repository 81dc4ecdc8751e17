"""The README shows, as commands to type, the install, build and test steps `.ci/run`
runs (each marked there `# README: ...`), so that what CI proves is what users read."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)


def ci_commands() -> dict[str, str]:
    """`# README: step` marker in .ci/run → the first command after it."""
    found: dict[str, str] = {}
    step = ""
    for line in (ROOT / ".ci" / "run").read_text().splitlines():
        if m := re.match(r"# README: (\w+)", line):
            step = m[1]
        elif step and line.strip() and not line.startswith(("#", "export ")):
            found[step] = line.strip()
            step = ""
    return found


def readme_command_lines() -> list[str]:
    blocks = SH_BLOCK.findall((ROOT / "README.md").read_text())
    return [line.split("  #", 1)[0].strip() for b in blocks for line in b.splitlines()]


def test_ci_marks_its_install_build_and_test_steps() -> None:
    assert set(ci_commands()) == {"install", "build", "test"}


def test_the_readme_shows_each_command_ci_runs_as_the_readme_says() -> None:
    shown = readme_command_lines()
    for step, command in ci_commands().items():
        assert command in shown, f"README shows no `{command}` ({step} step of .ci/run)"
