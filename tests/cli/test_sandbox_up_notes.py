"""What `gangkeeper sandbox up` tells its user once the sandbox is up: the exports on
stdout (for `eval`), and on stderr how to stop it and where to look next, `gangkeeper
view` among them (the page researchers read). The sandbox itself is replaced by a
stand-in that is up at once: what is checked here is the command's own output; the
real start is tests/readme/test_readme_sandbox.py's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import gangkeeper.webhook.sandbox as sandbox_package
from gangkeeper.webhook.cli import main


class UpAtOnce:
    """A Sandbox whose `up` returns what a started sandbox reports, starting nothing."""

    def __init__(self, directory: Path, **_: Any) -> None:
        self.directory = directory
        self.binaries = SimpleNamespace(kubectl=Path("/opt/k8s/bin/kubectl"))

    @staticmethod
    def up_steps(*_: Any, **__: Any) -> int:
        return 1

    def up(self, **_: Any) -> SimpleNamespace:
        return SimpleNamespace(
            startup_seconds=1.0, server="https://127.0.0.1:6443", nodes=["n0"],
            gangkeeper_url="https://127.0.0.1:8443", controller_url=None,
            directory=self.directory, kubeconfig=self.directory / "kubeconfig",
        )


def test_sandbox_up_names_gangkeeper_view_beside_the_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sandbox_package, "Sandbox", UpAtOnce)
    assert main(["sandbox", "up", "--dir", str(tmp_path), "--components", "none"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"export KUBECONFIG={tmp_path / 'kubeconfig'}",
                                "export PATH=/opt/k8s/bin:$PATH"]
    assert "`gangkeeper view`" in err, err
