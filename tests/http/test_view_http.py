"""`gangkeeper view` over HTTP, fed by a `FakeApi` cluster: the token guards every
request, the pages show the waiting gangs with their place and reason, the JSON each page
polls (the queue's, a gang's, the fleet's) follows the cluster and says what the page's
first HTML said, and the command serves loopback only."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from builders.gangs import T0, members
from builders.polling import wait_for
from builders.view_cluster import bind, queue_cluster

from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.view.server import create_view_app
from gangkeeper.webhook.view.source import reader

with warnings.catch_warnings():
    # Starlette asks for its httpx fork; the httpx it finds works for these tests.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TOKEN = "s3cret-token"
NOW = T0 + 60
PODS, NODES = "/api/v1/pods", "/api/v1/nodes"


def fake_cluster() -> FakeApi:
    api = FakeApi()
    pods, nodes = queue_cluster()
    api.seed(PODS, *pods)
    api.seed(NODES, *nodes)
    return api


@pytest.fixture
def api() -> FakeApi:
    return fake_cluster()


@pytest.fixture
def client(api: FakeApi) -> Iterator[TestClient]:
    app = create_view_app(reader(api, Config(), clock=lambda: NOW), TOKEN,
                          refresh_seconds=0.05)
    with TestClient(app) as test_client:
        yield test_client


@pytest.mark.parametrize("path", ["/", "/fleet", "/gang/team/first", "/api/state",
                                  "/api/gang/team/first", "/api/fleet", "/assets/view.js"])
@pytest.mark.parametrize("query", ["", "?token=wrong", f"?token={TOKEN}x"])
def test_every_path_needs_the_token(client: TestClient, path: str, query: str) -> None:
    answer = client.get(path + query)
    assert answer.status_code == 403
    assert "first" not in answer.text


def test_queue_page_shows_a_waiting_gang_with_its_position_and_reason(
    client: TestClient,
) -> None:
    answer = client.get(f"/?token={TOKEN}")
    assert answer.status_code == 200
    row = re.search(r'<tr data-gang="team/second">(.*?)</tr>', answer.text, re.S)
    assert row is not None
    assert '<td data-col="position">3 of 3</td>' in row.group(1)
    assert "needs 2 nvidia.com/gpu, 0 free on eligible nodes" in row.group(1)
    assert answer.headers["content-security-policy"].startswith("default-src 'self'")
    assert answer.headers["referrer-policy"] == "no-referrer"


def test_queue_filters_come_from_the_query(client: TestClient) -> None:
    page = client.get(f"/?token={TOKEN}&namespace=lab").text
    assert "lab/third" in page and "team/first" not in page
    bad = client.get(f"/?token={TOKEN}&state=sleeping")
    assert bad.status_code == 400 and "state must be one of" in bad.text


def test_gang_and_fleet_pages_render(client: TestClient, api: FakeApi) -> None:
    api.seed("/apis/events.k8s.io/v1/events", {
        "metadata": {"name": "e1", "namespace": "team"}, "type": "Normal",
        "reason": "GangWaiting", "regarding": {"kind": "Pod", "name": "first-0"},
        "note": "waits for 8 GPUs"})
    time.sleep(0.2)  # a refresh or two
    gang = client.get(f"/gang/team/first?token={TOKEN}")
    assert gang.status_code == 200
    assert "GangWaiting" in gang.text and "Name:         team/first" in gang.text
    assert client.get(f"/gang/team/nope?token={TOKEN}").status_code == 404
    fleet = client.get(f"/fleet?token={TOKEN}")
    assert fleet.status_code == 200 and "held for a waiting gang: team/urgent" in fleet.text


def test_state_endpoint_follows_the_cluster_without_a_reload(
    client: TestClient, api: FakeApi
) -> None:
    first = client.get(f"/api/state?token={TOKEN}&state=waiting").json()
    assert "urgent" in [r["gang"] for r in first["rows"]]
    pods = [p for p in api.objects[PODS].values()]
    bind(pods, "urgent", "a")
    api.seed(PODS, *pods)
    def rows_once_released() -> dict[str, Any] | None:
        rows = {r["gang"]: r for r in client.get(f"/api/state?token={TOKEN}").json()["rows"]}
        return rows if rows["urgent"]["state"] == "released" else None

    rows = wait_for(rows_once_released, 10, 0.05, message="urgent shown released")
    assert rows["urgent"]["state"] == "released" and rows["urgent"]["position"] is None
    assert rows["first"]["position"] == 1


def released(client: TestClient, api: FakeApi, gang: str, node_name: str) -> None:
    """Bind `gang` to `node_name` in the fake cluster and wait for the view to see it."""
    pods = list(api.objects[PODS].values())
    bind(pods, gang, node_name)
    api.seed(PODS, *pods)
    wait_for(lambda: gang in {r["gang"] for r in client.get(
                 f"/api/state?token={TOKEN}&state=released").json()["rows"]},
             10, 0.05, message=f"{gang} shown released")


def test_gang_endpoint_follows_the_cluster_and_says_what_the_page_says(
    client: TestClient, api: FakeApi,
) -> None:
    path = f"/api/gang/team/second?token={TOKEN}"
    before = client.get(path).json()["gang"]
    assert before["state"] == "waiting" and before["position"] == 3
    assert {m["pod"]: m["cells"][1:] for m in before["members"]} == {
        "second-0": ["—", "gated: the gang is waiting (held)"],
        "second-1": ["—", "gated: the gang is waiting (held)"],
    }
    assert ["Position", "3 of 3"] in before["facts"]
    assert "Name:         team/second" in before["explain"]
    # What the first HTML shows, cell for cell: the page reads the same after a poll.
    page = client.get(f"/gang/team/second?token={TOKEN}").text
    for member in before["members"]:
        pod, node_name, status = member["cells"]
        assert f'<th scope="row">{pod}</th><td>{node_name}</td><td>{status}</td>' in page
    assert html.escape(before["explain"]) in page

    released(client, api, "second", "b")
    after = client.get(path).json()["gang"]
    assert after["state"] == "released" and after["position"] is None
    assert {m["pod"]: m["cells"][1:] for m in after["members"]} == {
        "second-0": ["b", "bound, Ready"], "second-1": ["b", "bound, Ready"]}
    assert ["State", "released"] in after["facts"]
    assert after["events"]["none"] == "No Events." and after["events"]["rows"] == []


def test_gang_endpoint_of_a_gang_not_in_the_cluster_is_404(client: TestClient) -> None:
    answer = client.get(f"/api/gang/team/nope?token={TOKEN}")
    assert answer.status_code == 404
    assert answer.json()["gang"] is None and answer.json()["generated"] == NOW


def test_fleet_endpoint_follows_the_cluster_and_says_what_the_page_says(
    client: TestClient, api: FakeApi,
) -> None:
    def titles() -> dict[str, list[str]]:
        data = client.get(f"/api/fleet?token={TOKEN}").json()
        assert not data["aggregated"] and data["columns"] == ["Node", "Resource", "GPUs"]
        return {n["name"]: [c["title"] for c in n["cells"]]
                for g in data["groups"] for n in g["nodes"]}

    before = titles()
    held = "free, held for a waiting gang: team/urgent"
    assert before["b"] == ["gang team/done"] * 2 + [held] * 2
    data = client.get(f"/api/fleet?token={TOKEN}").json()
    page = client.get(f"/fleet?token={TOKEN}").text
    assert f'<p id="fleet-summary">{data["summary"]}</p>' in page
    assert data["legend"][0]["meaning"] == "held by gang team/done"

    released(client, api, "second", "b")
    after = titles()
    assert after["b"] == ["gang team/done"] * 2 + ["gang team/second"] * 2
    assert after["a"] == before["a"] and after["c"] == before["c"]
    second = [e for e in client.get(f"/api/fleet?token={TOKEN}").json()["legend"]
              if e["meaning"] == "held by gang team/second"]
    assert len(second) == 1 and second[0]["cell"]["class"].startswith("cell k-gang g")


def test_fleet_endpoint_of_a_large_fleet_sends_shapes_not_cells(api: FakeApi) -> None:
    app = create_view_app(reader(api, Config(), clock=lambda: NOW), TOKEN)
    with TestClient(app) as test_client:
        from gangkeeper.webhook.view import live

        state = test_client.app.state.snapshots.state  # type: ignore[attr-defined]
        wide = replace(state, fleet=replace(state.fleet, aggregated=True))
        data = live.fleet_json(wide)
    assert data["groups"] == [] and data["columns"][0] == "Shape"
    assert {s["cells"][0] for s in data["shapes"]} == {"4 x nvidia.com/gpu"}
    assert sum(s["gpus"] for s in data["shapes"]) == 12


def test_a_gang_named_script_is_escaped_on_every_page(api: FakeApi) -> None:
    evil = "<script>alert(1)</script>"
    pods = members("evil", 2)
    for raw in pods:
        raw["metadata"]["annotations"]["gangkeeper.io/gang-name"] = evil
    pods[0]["spec"].pop("schedulingGates")
    pods[0]["spec"]["nodeName"] = "c"  # so the fleet names it too
    api.seed(PODS, *pods)
    app = create_view_app(reader(api, Config(), clock=lambda: NOW), TOKEN)
    with TestClient(app) as test_client:
        for path in ("/", "/fleet", "/gang/team/evil"):
            page = test_client.get(f"{path}?token={TOKEN}").text
            assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        rows = test_client.get(f"/api/state?token={TOKEN}").json()["rows"]
        assert evil in [r["gang"] for r in rows]  # JSON carries it as data, not markup
        gang = test_client.get(f"/api/gang/team/evil?token={TOKEN}").json()["gang"]
        assert gang["gang"] == evil
        legend = test_client.get(f"/api/fleet?token={TOKEN}").json()["legend"]
        assert f"held by gang team/{evil}" in [e["meaning"] for e in legend]


def test_a_cluster_that_cannot_be_read_says_why(api: FakeApi) -> None:
    api.absent.add(NODES)
    app = create_view_app(reader(api, Config(), clock=lambda: NOW), TOKEN)
    with TestClient(app) as test_client:
        page = test_client.get(f"/?token={TOKEN}")
        assert page.status_code == 503 and "NotFound" in page.text
        assert "NotFound" in test_client.get(f"/api/state?token={TOKEN}").json()["error"]
        for path in ("/api/gang/team/first", "/api/fleet"):
            answer = test_client.get(f"{path}?token={TOKEN}")
            assert answer.status_code == 503 and "NotFound" in answer.json()["error"]
            assert answer.json()["generated"] is None


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: here
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: me
  user: {token: t}
contexts:
- name: here
  context: {cluster: here, user: me}
current-context: here
"""


def test_the_command_serves_loopback_with_a_token_in_the_url(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gangkeeper.webhook.cli", "view", "--kubeconfig",
         str(kubeconfig), "--refresh", "60"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"serving (http://127\.0\.0\.1:(\d+)/\?token=([\w-]+))", line)
        assert found is not None, line
        url, port, token = found.groups()
        assert len(token) >= 32

        def answer_once_listening() -> httpx.Response | None:
            try:
                return httpx.get(url, timeout=5)
            except httpx.TransportError:
                return None

        answer = wait_for(answer_once_listening, 20, 0.1, message="the view listening")
        # The API at 127.0.0.1:1 does not answer: the page says so, it does not crash.
        assert answer.status_code == 503 and "no snapshot of the cluster yet" in answer.text
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 403
    finally:
        proc.terminate()
        proc.communicate(timeout=20)  # also closes the pipes


@pytest.mark.parametrize(("args", "message"), [
    (["--port", "70000"], "--port must be 0..65535"),
    (["--refresh", "0"], "--refresh must be above 0"),
    (["--kubeconfig", "/nonexistent/kubeconfig"], "kubeconfig"),
])
def test_the_command_refuses_bad_input_with_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "gangkeeper.webhook.cli", "view", *args],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
