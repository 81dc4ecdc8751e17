"""`--config FILE` for every command: defaults, errors naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangkeeper.webhook.files.config import ConfigFileError, load_config_file


def test_no_path_gives_the_defaults() -> None:
    assert load_config_file(None).backend == "gate"


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("")
    assert load_config_file(path).backend == "gate"


def test_values_are_read(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("backend: volcano\nnamespaceBackends: {research: native}\n")
    config = load_config_file(path)
    assert config.backend_for("other") == "volcano"
    assert config.backend_for("research") == "native"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("backend: slurm\n", "backend"),
        ("bakend: gate\n", "bakend"),
        ("- a\n- b\n", "expected a mapping, got list"),
        ("a: [\n", "cannot read config"),
    ],
)
def test_bad_files_name_the_file_and_the_problem(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as err:
        load_config_file(path)
    assert str(path) in str(err.value)
    assert fragment in str(err.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"nope\.yaml"):
        load_config_file(tmp_path / "nope.yaml")
