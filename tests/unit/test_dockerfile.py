"""The Dockerfile, checked by reading it: no container engine runs on these machines.

What can be checked from the text: a multi-stage build on a slim Python 3.11 base, the
wheel built in the first stage, a final stage without compilers that runs as a numeric
non-root UID with `gangkeeper` as entrypoint and `serve` as default command, no
certificate or key copied in, and a .dockerignore that keeps key material out of the
build context. The UID must also be the one the Deployment runs as, or `runAsNonRoot`
pods would run under another user, and the Deployment's args must name the subcommand.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gangkeeper.webhook.install import RUN_AS, render_manifests

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args_of(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), words[0])
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages and keyword == "ARG":
            key, _, default = rest.partition("=")
            args[key.strip()] = default.strip()
        elif stages:
            stages[-1].instructions.append((keyword, rest.strip()))
    return args, stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse((REPO / "Dockerfile").read_text())[1]


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


def test_the_build_is_multi_stage_on_slim_python_3_11(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    for stage in stages:
        assert re.fullmatch(r"python:3\.11-slim(-\w+)?", stage.base), stage.base


def test_the_wheel_is_built_in_the_first_stage_and_only_installed_in_the_last(
    stages: list[Stage], final: Stage
) -> None:
    assert any("pip wheel" in run for run in stages[0].args_of("RUN"))
    installs = [run for run in final.args_of("RUN") if "pip install" in run]
    assert installs, "the final stage installs the built wheels"
    assert all("--no-index" in run for run in installs), "final stage must not build from source"


@pytest.mark.parametrize(
    "tool", ["build-essential", "gcc", "g++", "clang", "make", "python3-dev", "libffi-dev"]
)
def test_the_final_stage_installs_no_compiler(final: Stage, tool: str) -> None:
    for run in final.args_of("RUN"):
        assert not re.search(rf"(^|\s){re.escape(tool)}(\s|$)", run), run


def test_the_final_image_runs_as_the_numeric_non_root_uid_the_deployment_uses(
    final: Stage,
) -> None:
    users = final.args_of("USER")
    assert users, "the final stage sets USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0
    assert not gid or (gid.isdigit() and int(gid) != 0)
    assert int(uid) == RUN_AS
    deployments = [o for o in render_manifests() if o["kind"] == "Deployment"]
    assert len(deployments) == 2  # the webhook's and the controller's, one image
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] == int(uid)


def test_the_entrypoint_is_gangkeeper_and_the_default_command_serve_in_exec_form(
    final: Stage,
) -> None:
    # `IMAGE check ...` must run `gangkeeper check ...`, so the subcommand is in CMD.
    (entrypoint,) = final.args_of("ENTRYPOINT")
    assert json.loads(entrypoint) == ["gangkeeper"]
    (command,) = final.args_of("CMD")
    assert json.loads(command)[0] == "serve"


def test_the_deployment_and_the_helm_chart_name_the_subcommand_the_entrypoint_lacks() -> None:
    for deployment in (o for o in render_manifests() if o["kind"] == "Deployment"):
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["args"][0] == "serve"
    # Both of the chart's Deployments are this one template.
    template = (REPO / "deploy/helm/gangkeeper/templates/_deployment.tpl").read_text()
    after_args = template.split("\n        args:\n", 1)[1]
    assert after_args.splitlines()[0].strip() == "- serve", "the chart's args must start with serve"


def test_examples_are_shipped_for_the_no_cluster_mode(final: Stage) -> None:
    assert any(copy.split()[0].rstrip("/") == "examples" for copy in final.args_of("COPY"))


def _sources(copy: str) -> list[str]:
    words = [w for w in copy.split() if not w.startswith("--")]
    return words[:-1]


def test_no_certificate_or_key_is_copied_into_any_stage(stages: list[Stage]) -> None:
    for stage in stages:
        for copy in stage.args_of("COPY") + stage.args_of("ADD"):
            for source in _sources(copy):
                assert not re.search(r"\.(key|pem|crt|p12)$|(^|/)tls\.|(^|/)ca\.", source), copy
                # The package folder certs/ doubles as the default --cert-dir: copy code only.
                if source.rstrip("/") in ("certs", ".") or source.startswith("certs/*"):
                    assert source.endswith((".py", "py.typed")), copy


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """Docker's .dockerignore syntax (Go filepath.Match plus `**`), anchored at the root."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `path` out: the last matching pattern wins, and a pattern
    that matches a directory excludes everything below it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _pattern_regex(pattern.lstrip("!").strip("/"))
        if any(regex.fullmatch(p) for p in prefixes):
            ignored = not negate
    return ignored


@pytest.mark.parametrize(
    "path",
    [
        "certs/tls.key",
        "certs/ca.key",
        "certs/tls.crt",
        "certs/ca.crt",
        "somewhere/else/server.pem",
        ".sandbox/pki/apiserver.key",
        ".git/config",
    ],
)
def test_dockerignore_keeps_keys_and_certificates_out_of_the_context(path: str) -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert dockerignored(path, patterns), f"{path} would be sent to the builder"


@pytest.mark.parametrize("path", ["certs/issue.py", "webhook/app.py", "examples/fleet.yaml"])
def test_dockerignore_keeps_what_the_image_needs(path: str) -> None:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not dockerignored(path, patterns), f"{path} is needed by the build"
