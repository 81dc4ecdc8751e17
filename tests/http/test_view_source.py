"""`gangkeeper view` reading a cluster as a user whose RBAC stops short: it may list
pods in some namespaces but not in every one (the usual researcher's Role). The view
shows the gangs it may read, none of the others, and says on the page what it could
not read, instead of answering nothing at all."""

from __future__ import annotations

import warnings

from builders.gangs import T0
from builders.rbac_api import rbac_cluster

from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.view.server import create_view_app
from gangkeeper.webhook.view.source import reader

with warnings.catch_warnings():
    # Starlette asks for its httpx fork; the httpx it finds works for these tests.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

NOW = T0 + 60


def test_a_user_who_may_list_pods_in_one_namespace_sees_its_gangs_and_no_others() -> None:
    state = reader(rbac_cluster(), Config(), clock=lambda: NOW)()
    assert [(r.namespace, r.name) for r in state.rows] == [("a", "mine")]
    assert len(state.notes) == 1
    assert "cannot list Pods in namespace b" in state.notes[0]


def test_the_pages_say_what_the_user_could_not_read() -> None:
    app = create_view_app(reader(rbac_cluster(), Config(), clock=lambda: NOW), "t",
                          refresh_seconds=60)
    with TestClient(app) as client:
        queue = client.get("/", params={"token": "t"})
        state = client.get("/api/state", params={"token": "t"}).json()
    assert queue.status_code == 200
    assert "a/mine" in queue.text and "b/theirs" not in queue.text
    assert "cannot list Pods in namespace b" in queue.text
    assert [r["gang"] for r in state["rows"]] == ["mine"]
    assert any("namespace b" in note for note in state["notes"])


def test_a_user_who_may_list_no_namespaces_is_told_to_name_one() -> None:
    api = rbac_cluster(list_namespaces=False)
    app = create_view_app(reader(api, Config(), clock=lambda: NOW), "t", refresh_seconds=60)
    with TestClient(app) as client:
        answer = client.get("/", params={"token": "t"})
    assert answer.status_code == 503
    assert "-n NAMESPACE" in answer.text
    # Named, it reads that namespace alone.
    state = reader(api, Config(), "a", clock=lambda: NOW)()
    assert [r.name for r in state.rows] == ["mine"]
    assert len(state.notes) == 1 and "other namespaces" in state.notes[0]
