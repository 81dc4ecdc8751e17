"""Errors name the command as it was typed: `kubectl gangkeeper check: ...` from the
kubectl plugin, `gangkeeper check: ...` from the script, and a sub-command's own usage
line on its own errors (an unknown flag included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangkeeper.webhook.cli.exit_codes import EXIT_BAD_INPUT
from gangkeeper.webhook.cli.main import kubectl_main, main

ROOT = Path(__file__).resolve().parents[2]


def test_kubectl_plugin_errors_name_the_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent.yaml"
    code = kubectl_main(["check", "-f", str(missing), "--nodes", str(missing)])
    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT
    assert err.startswith("kubectl gangkeeper check: "), err


def test_script_errors_keep_the_script_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "absent.yaml"
    assert main(["check", "-f", str(missing), "--nodes", str(missing)]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith("gangkeeper check: ")


@pytest.mark.parametrize(
    ("entry", "prog"), [(main, "gangkeeper"), (kubectl_main, "kubectl gangkeeper")]
)
@pytest.mark.parametrize("argv", [["status", "--bogus"], ["check", "--nodes", "x"]])
def test_a_subcommands_errors_show_its_usage(
    entry: object, prog: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        entry(argv)  # type: ignore[operator]
    err = capsys.readouterr().err
    assert exited.value.code == EXIT_BAD_INPUT
    assert err.startswith(f"usage: {prog} {argv[0]} "), err
    assert f"{prog} {argv[0]}: error: " in err
