"""The shell commands the README and docs/*.md show, as a reader would type them.

Reads the pages only (no process is run here). A command is one line of a ```sh block,
its `\\` continuations and its here-document joined to it, with the trailing
`# comment` dropped. Runner tests take the commands they run from here, by page and
block, so what they run is what the page shows; tests/readme/test_every_command_shown.py
checks that every command shown is run by one of them or listed, with its reason, as
one that cannot run in a test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Every page whose commands are held to this: the README and every docs page.
PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: Fence languages a page may use; only `sh` holds commands (output blocks are bare).
KNOWN_LANGUAGES = {"sh", "", "yaml", "json"}
COMMENT = re.compile(r"\s+#(?:\s.*)?$")
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
#: `X || echo "..."`: the page runs X and says what its failure means; X is the command.
OR_ECHO = re.compile(r"\s*\|\|\s*echo\s+(?:\"[^\"]*\"|'[^']*')\s*$")


@dataclass(frozen=True)
class Shown:
    """One command of a page: where it is and its text, comment dropped."""

    page: str
    line: int
    block: int
    text: str
    #: The `# comment` after it on the page (`exit 1: reject`), without the `#`.
    comment: str = ""

    @property
    def command(self) -> str:
        """The command run, without a trailing `|| echo "..."` note."""
        return OR_ECHO.sub("", self.text)


def fences(page: str) -> list[tuple[str, str, int]]:
    """(language, body, line of the body's first line) of every fenced block."""
    text = (ROOT / page).read_text()
    return [(m[1], m[2], text.count("\n", 0, m.start(2)) + 1) for m in FENCE.finditer(text)]


def block_commands(body: str, first_line: int) -> list[tuple[int, str, str]]:
    """(line, command, comment) of every command of one ```sh block."""
    lines = body.splitlines()
    found: list[tuple[int, str, str]] = []
    i = 0
    while i < len(lines):
        start = i
        if not lines[i].strip() or lines[i].lstrip().startswith("#"):
            i += 1
            continue
        parts = [lines[i].rstrip()]
        while parts[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            parts.append(lines[i].strip())
        command = " ".join(p.removesuffix("\\").strip() for p in parts)
        if heredoc := HEREDOC.search(command):
            body_lines = []
            while i + 1 < len(lines) and lines[i + 1].strip() != heredoc[1]:
                i += 1
                body_lines.append(lines[i])
            i += 1  # the terminator
            text = "\n".join([command, *body_lines, heredoc[1]])
            found.append((first_line + start, text, ""))
        else:
            said = COMMENT.search(command)
            comment = said[0].strip().removeprefix("#").strip() if said else ""
            found.append((first_line + start, COMMENT.sub("", command), comment))
        i += 1
    return found


def shown(page: str) -> list[Shown]:
    """Every command of the page's ```sh blocks, in order."""
    commands: list[Shown] = []
    sh_blocks = [(body, line) for language, body, line in fences(page) if language == "sh"]
    for index, (body, line) in enumerate(sh_blocks):
        commands += [Shown(page, n, index, *found) for n, *found in block_commands(body, line)]
    return commands


def every_shown() -> list[Shown]:
    return [command for page in PAGES for command in shown(page)]


def block(page: str, containing: str) -> list[Shown]:
    """The commands of the one ```sh block of `page` that has a command containing
    `containing` (an error if none or several: the runner must name one block)."""
    commands = shown(page)
    hits = {c.block for c in commands if containing in c.text}
    assert len(hits) == 1, f"{page}: {len(hits)} ```sh blocks with `{containing}`"
    return [c for c in commands if c.block in hits]
