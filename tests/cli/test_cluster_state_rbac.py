"""`gangkeeper status` and `explain` as a user who may list pods in some namespaces
only (a Role, no ClusterRole): they answer from what the user may read, as
`gangkeeper view` does (the same `kube.live_pods`), and say on stderr what was left
out, instead of failing on the list of every namespace's pods."""

from __future__ import annotations

import json
from typing import Any

import pytest
from builders.rbac_api import RbacApi, rbac_cluster

from gangkeeper.policies.errors import ClusterStateError
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.cli import cluster_state
from gangkeeper.webhook.cli.main import build_parser


def test_read_cluster_lists_the_readable_namespaces_and_names_the_others() -> None:
    read = cluster_state.read_cluster(rbac_cluster(), Config(), None, "gangkeeper status")
    assert {p["metadata"]["namespace"] for p in read.pods} == {"a"}
    assert len(read.notes) == 1 and "cannot list Pods in namespace b" in read.notes[0]
    assert [n["metadata"]["name"] for n in read.nodes] == ["n"]


def test_a_user_who_may_list_no_namespaces_is_told_to_name_one() -> None:
    api = rbac_cluster(list_namespaces=False)
    with pytest.raises(ClusterStateError, match=r"run `gangkeeper status -n NAMESPACE`"):
        cluster_state.read_cluster(api, Config(), None, "gangkeeper status")
    read = cluster_state.read_cluster(api, Config(), "a", "gangkeeper status")
    assert {p["metadata"]["namespace"] for p in read.pods} == {"a"}
    assert "other namespaces" in read.notes[0]


@pytest.fixture
def as_researcher(monkeypatch: pytest.MonkeyPatch) -> RbacApi:
    """The commands' client is the researcher's: `rbac_cluster`, namespace b hidden."""
    api = rbac_cluster()
    monkeypatch.setattr(cluster_state, "api_client", lambda *_args: None)
    monkeypatch.setattr(cluster_state, "Rest", lambda _client: api)
    return api


def run(*argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    code: Any = args.run(args)
    return int(code)


def test_status_shows_the_readable_namespaces_gangs_and_says_what_it_left_out(
    as_researcher: RbacApi, capsys: pytest.CaptureFixture[str],
) -> None:
    assert run("status", "-o", "json") == 0
    out, err = capsys.readouterr()
    assert [(r["namespace"], r["gang"]) for r in json.loads(out)] == [("a", "mine")]
    assert "note: cannot list Pods in namespace b (forbidden)" in err


def test_explain_explains_a_gang_of_a_namespace_the_user_may_read(
    as_researcher: RbacApi, capsys: pytest.CaptureFixture[str],
) -> None:
    assert run("explain", "pod/mine-0", "-n", "a") == 0
    out, err = capsys.readouterr()
    assert "Name:         a/mine" in out
    assert "only a's are counted" in err
