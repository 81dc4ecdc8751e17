"""docs/performance.md holds figures, each with its date and the command that measured
it, not a story of how they came about: every section names its command and date, every
earlier run is one dated line, and every command named exists in this tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "performance.md"
DATE = r"20\d\d-\d\d-\d\d"
#: `## Title` / `### Title` → the section's text up to the next heading of any level.
SECTION = re.compile(r"^#{2,3} ([^\n]+)\n(.*?)(?=^#{2,3} |\Z)", re.S | re.M)
COMMAND = re.compile(r"^- Command: `([^`]+)`", re.M)
BENCH_MODULE = re.compile(r"python -m (bench(?:\.\w+)?)")


def sections() -> dict[str, str]:
    return {m[1]: m[2] for m in SECTION.finditer(PAGE.read_text()) if m[1] != "Contents"}


@pytest.mark.parametrize("title", sorted(sections()))
def test_each_section_names_the_command_and_the_date_of_its_figures(title: str) -> None:
    body = sections()[title]
    assert COMMAND.search(body), f"{title}: no '- Command: `...`' line"
    assert re.search(rf"^- Date: {DATE}", body, re.M), f"{title}: no '- Date: YYYY-MM-DD' line"


def test_every_earlier_run_is_one_dated_line() -> None:
    lists = re.findall(r"^Other [^\n]*:\n((?:(?:- |  )[^\n]*\n)+)", PAGE.read_text(), re.M)
    assert lists, "the page lists no earlier runs"
    for block in lists:
        for item in re.split(r"^- ", block, flags=re.M)[1:]:
            assert re.match(DATE, item), f"an earlier run without its date first: {item!r}"


def test_every_benchmark_command_named_exists() -> None:
    named = set(BENCH_MODULE.findall(PAGE.read_text()))
    assert named, "the page names no benchmark"
    for module in named:
        path = ROOT / Path(*module.split("."))
        assert path.with_suffix(".py").is_file() or (path / "__main__.py").is_file(), module
