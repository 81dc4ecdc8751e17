"""Each page of the README and docs/ opens with a table of contents that lists every
`##` section of the page, and every `(#anchor)` link on a page leads to a heading of
that page (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
HEADING = re.compile(r"^(#{1,6}) (.+)$", re.M)
ANCHOR_LINK = re.compile(r"\]\(#([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def prose(page: Path) -> str:
    """The page without its code blocks (a `# comment` there is no heading)."""
    return FENCE.sub("", page.read_text())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_contents_list_every_section_of_the_page(page: Path) -> None:
    text = prose(page)
    sections = [h for level, h in HEADING.findall(text) if level == "##" and h != "Contents"]
    listed = set(ANCHOR_LINK.findall(text.split("\n## ", 1)[0] + _contents(text)))
    unlisted = [h for h in sections if anchor(h) not in listed]
    assert not unlisted, f"{page.name}: sections missing from its contents: {unlisted}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_anchor_link_leads_to_a_heading_of_the_page(page: Path) -> None:
    text = prose(page)
    headings = {anchor(h) for _, h in HEADING.findall(text)}
    dangling = sorted(set(ANCHOR_LINK.findall(text)) - headings)
    assert not dangling, f"{page.name}: links to no heading: {dangling}"


def _contents(text: str) -> str:
    """The `## Contents` section, where the page has one."""
    parts = re.split(r"^## Contents$", text, maxsplit=1, flags=re.M)
    return parts[1].split("\n## ", 1)[0] if len(parts) == 2 else ""
