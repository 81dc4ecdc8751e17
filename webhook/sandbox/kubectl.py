"""The sandbox's kubectl, bound to one kubeconfig.

May touch: the kubectl binary it is given, run as a subprocess against the sandbox's
API server. Nothing else.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import SandboxError


@dataclass(frozen=True)
class Kubectl:
    binary: Path
    kubeconfig: Path

    def run(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl with ARGS; `check` raises CalledProcessError on failure."""
        return subprocess.run(
            [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            check=check,
        )

    def must(self, *args: str, input: str | None = None) -> None:
        """Run kubectl; a failure is a SandboxError that quotes kubectl's stderr."""
        done = self.run(*args, input=input, check=False)
        if done.returncode != 0:
            raise SandboxError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")

    def applied(self, path: Path) -> bool:
        """Whether `kubectl apply --server-side -f PATH` succeeded (for retrying)."""
        return self.run("apply", "--server-side", "-f", str(path), check=False).returncode == 0

    def kustomize(self, directory: Path) -> str:
        done = self.run("kustomize", str(directory), check=False)
        if done.returncode != 0:
            raise SandboxError(f"kubectl kustomize {directory} failed: {done.stderr.strip()}")
        return done.stdout
