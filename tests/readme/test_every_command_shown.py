"""Every command the README and docs/*.md show in a ```sh block is run by a test, or is
listed here with the reason no test can run it.

The runners and the lines each runs are in `builders.docs_runs` (each runner imports
its lines from there); `.ci/run` runs the install, build and test lines. A command a
page gains is neither, and fails the first test until a runner takes it or it is listed
below with its reason.
"""

from __future__ import annotations

from builders.docs_runs import RUNNERS, ci_lines
from builders.shown_commands import KNOWN_LANGUAGES, PAGES, ROOT, every_shown, fences

CLUSTER_INSTALL = (
    "installs gangkeeper's Deployments and webhook registration, which would take over the "
    "shared sandbox's; the operator guide test installs `deploy/` for real in its own "
    "sandbox, and tests/deploy/test_kustomize.py builds this overlay and compares it with "
    "the renderer object by object"
)
HELM_CERT_MANAGER = (
    "needs cert-manager's controller, which no sandbox runs (its nested Go modules are not "
    "on the module proxy); tests/deploy/test_helm_chart.py renders these values "
    "(cert-manager-coscheduling) and tests/deploy/test_install_cert_manager.py has the API "
    "server accept the chart's cert-manager objects"
)
FRESH_VENV = (
    "a fresh virtualenv installing from PyPI takes minutes here (8 min under load on "
    "2026-12-03): too long for CI's 30; CI's install step is the same editable install "
    "with [dev] (`python3 -m pip install -e '.[dev]'`), and tests/deploy/test_wheel.py "
    "installs the wheel into a new venv and runs its `check` and `serve`"
)
IN_CI_SUITE = "these tests are part of the suite .ci/run runs (`python3 -m pytest`)"
#: (page, command) → why no test runs it as shown.
NOT_RUN: dict[tuple[str, str], str] = {
    ("README.md", "python3 -m venv .venv && . .venv/bin/activate"): FRESH_VENV,
    ("README.md", "pip install -e ."): FRESH_VENV,
    ("README.md", "helm install gangkeeper deploy/helm/gangkeeper -n gangkeeper-system "
     "--create-namespace --set config.backend=coscheduling --set certMode=cert-manager"):
        HELM_CERT_MANAGER,
    ("docs/install.md", "helm install gangkeeper deploy/helm/gangkeeper -n gangkeeper-system "
     "--create-namespace --set config.backend=coscheduling --set certMode=cert-manager"):
        HELM_CERT_MANAGER,
    ("docs/install.md", "kubectl apply --server-side -k deploy/overlays/cert-manager"):
        "needs cert-manager running in the cluster; tests/deploy/test_install_cert_manager.py "
        "has the API server accept this overlay (server-side dry run) with cert-manager's "
        "CRDs, and " + CLUSTER_INSTALL.split("; ", 1)[1],
    ("docs/install.md", "kubectl apply --server-side -k deploy/overlays/coscheduling"):
        CLUSTER_INSTALL,
    ("docs/install.md", "podman push localhost/gangkeeper:0.1.0 REGISTRY/gangkeeper:0.1.0"):
        "REGISTRY is the reader's registry, and no container registry is reachable from CI; "
        "the image it pushes is built by .ci/run (deploy/image/build.sh)",
    ("docs/install.md", "helm install gangkeeper deploy/helm/gangkeeper -n gangkeeper-system "
     "--create-namespace --set image.repository=REGISTRY/gangkeeper --set image.tag=0.1.0"):
        "REGISTRY is the reader's registry; tests/deploy/test_helm_chart.py renders these "
        "image values (`image`), and the operator guide test installs the chart for real",
    ("docs/performance.md", "python -m bench --quick"):
        "every benchmark in a row, minutes of CPU and sandboxes of their own; tests/bench "
        "runs each benchmark's --quick form (test_bench_commands.py, test_bench_load.py, "
        "test_bench_preemption_cluster.py, ...) and test_bench_main.py the runner itself",
    ("docs/performance.md", "python -m bench"):
        "the full run, about 18 minutes on 2 cores (it writes docs/bench/report.md); too long "
        "for CI, whose suite must stay near 30 minutes",
    ("docs/reliability.md", "python3 -m pytest tests/e2e/test_replicas.py "
     "tests/e2e/test_controller_crashes.py tests/e2e/test_control_plane_faults.py "
     "tests/e2e/test_member_replaced.py tests/e2e/test_ungate.py "
     "tests/e2e/test_failure_policy.py"): IN_CI_SUITE,
    ("docs/reliability.md", "python -m bench.load --quick"):
        "tests/bench/test_bench_load.py runs it, with `--json OUT` added to read its figures",
    ("docs/reliability.md", "python -m bench.load"):
        "10,000 pods on 1,000 nodes, about 10 minutes; its --quick form is run (above)",
    ("docs/sandbox.md", "python3 -m pytest tests/e2e"): IN_CI_SUITE,
    ("docs/sandbox.md", "GANGKEEPER_E2E=require python3 -m pytest"):
        ".ci/run runs exactly this, as `export GANGKEEPER_E2E=require` then `python3 -m pytest`",
    ("docs/sandbox.md", "python3 -m pytest tests/e2e --k8s-kubeconfig PATH"):
        "needs a cluster of the reader's (PATH) with gangkeeper installed; the same tests run "
        "against the sandbox in CI",
}  # fmt: skip


def run_commands() -> set[str]:
    return {c.command for lines in RUNNERS.values() for c in lines} | ci_lines()


def test_every_command_shown_is_run_by_a_test_or_listed_with_its_reason() -> None:
    run = run_commands()
    unrun = [
        f"{c.page}:{c.line}: {c.command}"
        for c in every_shown()
        if c.command not in run and (c.page, c.command) not in NOT_RUN
    ]
    assert not unrun, "commands no test runs and not listed in NOT_RUN:\n" + "\n".join(unrun)


def test_every_listed_command_is_still_shown_and_not_run_after_all() -> None:
    shown = {(c.page, c.command) for c in every_shown()}
    assert not set(NOT_RUN) - shown, f"listed but no longer shown: {set(NOT_RUN) - shown}"
    run = run_commands()
    assert not [k for k in NOT_RUN if k[1] in run], "listed as not run, but a test runs it"
    assert all(len(reason) > 40 for reason in NOT_RUN.values())


#: How many lines each runner runs. A runner takes some lines by their block: a line a
#: page adds to that block is counted here, and fails until the runner runs it too.
RUNNER_LINES = {
    "tests/readme/test_readme_sandbox.py": 6,
    "tests/readme/test_readme_check.py": 7,
    "tests/readme/test_operator_guide.py": 27,
    "tests/readme/test_docs_offline_commands.py": 11,
    "tests/e2e/test_docs_commands.py": 16,
}


def test_each_runner_runs_the_lines_it_was_written_for() -> None:
    for runner in RUNNERS:
        assert (ROOT / runner).is_file(), runner
    found = {runner: len(lines) for runner, lines in RUNNERS.items()}
    assert found == RUNNER_LINES, "a page changed the lines a runner takes: run the new ones"


def test_commands_are_shown_only_in_sh_blocks() -> None:
    # A ```bash or ```console block would hold commands this inventory does not read.
    for page in PAGES:
        languages = {language for language, _, _ in fences(page)}
        assert languages <= KNOWN_LANGUAGES, f"{page}: fences {languages - KNOWN_LANGUAGES}"


def test_the_pages_show_commands_at_all() -> None:
    # The parser reading nothing would pass every test above.
    pages = {c.page for c in every_shown()}
    assert {"README.md", "docs/operator-guide.md", "docs/install.md"} <= pages
    assert len(every_shown()) >= 90
