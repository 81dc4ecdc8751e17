"""Which test runs which command of the README and docs/, as the lines it takes from the
pages (`shown_commands`). Each runner imports its lines from here and runs them as they
are; tests/readme/test_every_command_shown.py reads `RUNNERS` to hold every command shown
to a runner or to its list of commands no test can run.

Only page text is read here; nothing is run.
"""

from __future__ import annotations

import re

from builders.shown_commands import ROOT, Shown, block, shown

# tests/readme/test_readme_sandbox.py: the sandbox walk-through (its build line is CI's).
SANDBOX_WALK_THROUGH = [
    c for c in block("README.md", "gangkeeper sandbox up") if c.command != "deploy/sandbox/build.sh"
]

# tests/readme/test_readme_check.py: the offline `check` lines of the README and policy.md.
OFFLINE_CHECK = re.compile(r"^gangkeeper check --nodes examples/\S+ [^|]*$")
CHECK_PAGES = ("README.md", "docs/policy.md")
OFFLINE_CHECKS = [c for p in CHECK_PAGES for c in shown(p) if OFFLINE_CHECK.match(c.command)]

# tests/readme/test_operator_guide.py: every block of the guide, by its name.
OPERATOR_GUIDE = shown("docs/operator-guide.md")

# tests/readme/test_docs_offline_commands.py: what needs no cluster.
QUICK_START_SERVE = [
    c for c in block("README.md", "python3 -m venv") if c.command == "gangkeeper serve"
]
README_PROBE = block("README.md", "/readyz")
README_OWNERS = block("README.md", "--owners")
#: server.md's serve lines that need a cluster (run by tests/e2e/test_docs_commands.py).
SERVE_NEEDS_CLUSTER = (
    "gangkeeper serve --kubeconfig ~/.kube/config",
    "gangkeeper serve --controller-only --kubeconfig ~/.kube/config",
)
SERVER_MD_OFFLINE = [
    c for c in shown("docs/server.md")
    if c.command.startswith("gangkeeper serve") and c.command not in SERVE_NEEDS_CLUSTER
]  # fmt: skip
LOCAL_CERTS = block("docs/install.md", "gangkeeper certs --dir")
HELM_PIPE = [c for c in shown("docs/policy.md") if c.command.startswith("helm template")]
BENCH_POLICY = [
    c for c in shown("docs/performance.md") if c.command == "python -m bench.policy --quick"
]

# tests/e2e/test_docs_commands.py: what reads or serves a live cluster.
TEAM_A = "team-a"
LABEL_TEAM_A = [
    c for p in ("README.md", "docs/install.md") for c in shown(p)
    if c.command == f"kubectl label namespace {TEAM_A} gangkeeper.io/enabled=true"
]  # fmt: skip
CONTROLLER_MD = block("docs/controller.md", "gangkeeper explain")
CHECK_LIVE = [
    c for p in CHECK_PAGES for c in shown(p)
    if c.command.startswith("gangkeeper check --kubeconfig")
]  # fmt: skip
VIEW_MD = block("docs/view.md", "gangkeeper view")
SERVER_MD_CLUSTER = [c for c in shown("docs/server.md") if c.command in SERVE_NEEDS_CLUSTER]
UNGATE_FORCE = [c for c in shown("docs/install.md") if c.command == "gangkeeper ungate --force"]

#: Runner → the lines of the pages it runs.
RUNNERS: dict[str, list[Shown]] = {
    "tests/readme/test_readme_sandbox.py": SANDBOX_WALK_THROUGH,
    "tests/readme/test_readme_check.py": OFFLINE_CHECKS,
    "tests/readme/test_operator_guide.py": OPERATOR_GUIDE,
    "tests/readme/test_docs_offline_commands.py": [
        *QUICK_START_SERVE, *README_PROBE, *README_OWNERS, *SERVER_MD_OFFLINE, *LOCAL_CERTS,
        *HELM_PIPE, *BENCH_POLICY,
    ],
    "tests/e2e/test_docs_commands.py": [
        *LABEL_TEAM_A, *CONTROLLER_MD, *CHECK_LIVE, *VIEW_MD, *SERVER_MD_CLUSTER,
        *UNGATE_FORCE,
    ],
}  # fmt: skip


def ci_lines() -> set[str]:
    """The commands `.ci/run` runs (every line that is not a comment, `set` or `cd`)."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    skip = ("#", "set ", "cd ", "export ")
    return {line.strip() for line in lines if line.strip() and not line.startswith(skip)}
