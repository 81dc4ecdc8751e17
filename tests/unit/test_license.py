"""The licence pyproject.toml declares is the one the repository ships, in full."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The headings of the nine sections of the Apache License 2.0, in order.
SECTIONS = [
    "Definitions",
    "Grant of Copyright License",
    "Grant of Patent License",
    "Redistribution",
    "Submission of Contributions",
    "Trademarks",
    "Disclaimer of Warranty",
    "Limitation of Liability",
    "Accepting Warranty or Additional Liability",
]


def test_pyproject_declares_apache_2() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"}


def test_the_repository_root_holds_the_whole_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:5] == ["Apache", "License", "Version", "2.0,", "January"]
    headings = re.findall(r"^\s+(\d)\. (.+?)\.", text, re.M)
    assert headings == [(str(i), name) for i, name in enumerate(SECTIONS, start=1)]
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License to your work." in text
