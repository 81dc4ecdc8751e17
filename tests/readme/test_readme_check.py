"""The `gangkeeper check` commands the README and docs/policy.md show, run as written:
each offline one (`--nodes examples/...`) exits as its `# exit N` comment says, and the
output the page prints after them is exactly what one of them prints.

(The `--kubeconfig` line needs a cluster: tests/e2e/test_docs_commands.py runs it; the
`helm template ... | ...` line a chart: tests/readme/test_docs_offline_commands.py.)"""

from __future__ import annotations

import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from builders.docs_runs import CHECK_PAGES, OFFLINE_CHECKS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / page for page in CHECK_PAGES]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(page: Path) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return [(m[1], m[2]) for m in BLOCK.finditer(page.read_text())]


def offline_commands(page: Path) -> list[tuple[list[str], str]]:
    """(argv after `gangkeeper`, the comment) of every offline check line of the page."""
    name = str(page.relative_to(ROOT))
    return [
        (shlex.split(c.command)[1:], c.comment) for c in OFFLINE_CHECKS if c.page == name
    ]


def check(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gangkeeper.webhook.cli", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_each_check_command_shown_exits_as_its_comment_says(page: Path) -> None:
    commands = offline_commands(page)
    assert commands, f"{page.name} shows no offline gangkeeper check command"
    for argv, comment in commands:
        done = check(argv)
        said = re.search(r"exit (\d)", comment)
        expected = int(said[1]) if said else 0
        assert done.returncode == expected, (argv, done.stdout, done.stderr)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_output_shown_is_what_a_check_command_shown_prints(page: Path) -> None:
    shown = shown_output(page)
    printed = [check(argv).stdout for argv, _ in offline_commands(page)]
    assert shown in printed, f"{page.name} shows:\n{shown}\ncheck prints:\n" + "\n".join(printed)


def shown_output(page: Path) -> str:
    """The plain block right after the first sh block that runs `gangkeeper check`."""
    found = blocks(page)
    for (language, body), (after_language, after) in itertools.pairwise(found):
        if language == "sh" and "gangkeeper check" in body and after_language == "":
            return after
    raise AssertionError(f"{page.name} shows no output after its check commands")
