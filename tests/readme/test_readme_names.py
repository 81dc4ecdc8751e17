"""The table of names (docs/names.md, linked from the README) says exactly what
`gangkeeper.policies.names` defines."""

from __future__ import annotations

import re
from pathlib import Path

from gangkeeper.policies import names

NAMES = Path(__file__).resolve().parents[2] / "docs" / "names.md"
ROW = re.compile(r"^\| `([^`]+)` \| `([A-Z_]+)` \|")


def readme_names() -> dict[str, str]:
    section = NAMES.read_text().split("## Labels, annotations, gates and objects", 1)[1]
    section = section.split("\n## ", 1)[0]
    return {m[2]: m[1] for line in section.splitlines() if (m := ROW.match(line))}


def module_names() -> dict[str, str]:
    return {
        key: value
        for key, value in vars(names).items()
        if key.isupper() and isinstance(value, str)
    }


def test_the_readme_lists_every_name_of_the_names_module_with_its_value() -> None:
    assert readme_names() == module_names()

