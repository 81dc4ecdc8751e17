"""An owner the watch caches lack is fetched off the event loop.

A Job's first pods can reach the webhook before the Job's watch event reaches the
server's cache; the view then GETs the Job (bounded by `MISS_TIMEOUT_SECONDS`). That
GET used to run inside the async handler, so every other admission waited behind it.
Now the admission that needs it is decided again in a worker thread: here the API's
GET of the Job takes 0.4 s, and a plain pod sent meanwhile is answered long before
the Job's pod, which is still gang-keyed from the fetched Job.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from builders.reviews import admission_review

from gangkeeper.policies.names import GATE
from gangkeeper.policies.settings.config import Config
from gangkeeper.webhook.kube.api import Query
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.informer import Informers
from gangkeeper.webhook.kube.resources import NODES, Resource
from gangkeeper.webhook.server.app import Server, create_app
from gangkeeper.webhook.server.cluster_view import WatchClusterView

JOBS = Resource("batch", "v1", "jobs", "Job")
SLOW_GET_SECONDS = 0.4


class SlowGets(FakeApi):
    """The in-memory API, with a GET of one object taking a while (an API server under
    load)."""

    def get(self, path: str, query: Query = (), *, timeout: float = 30.0) -> dict[str, Any]:
        if "/jobs/" in path:
            time.sleep(SLOW_GET_SECONDS)
        return super().get(path, query, timeout=timeout)


def job() -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": "team", "uid": "uid-job"},
            "spec": {"completionMode": "Indexed", "completions": 2, "parallelism": 2,
                     "template": {"spec": {"containers": [{"name": "c", "resources": {
                         "limits": {"nvidia.com/gpu": "1"}}}]}}}}


def pod(name: str, owner: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team"}
    if owner:
        meta["labels"] = {"job-name": "train", "batch.kubernetes.io/job-name": "train"}
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                    "uid": "uid-job", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": "1"}}}]}}


@pytest.fixture
def server() -> Iterator[Server]:
    api = SlowGets()
    api.seed(NODES.path, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                          "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    informers = Informers(api)
    config = Config()
    view = WatchClusterView(informers, config, owners=(JOBS,))
    informers.start()
    try:
        assert view.wait_synced(5.0)
        api.seed(JOBS.path, job())  # created, but its watch event not yet seen
        yield Server(config=config, view=view)
    finally:
        informers.stop()


async def _post(client: httpx.AsyncClient, obj: dict[str, Any]) -> tuple[float, Any]:
    response = await client.post("/mutate", json=admission_review(obj))
    return time.monotonic(), response.json()


def test_a_missing_owner_is_fetched_in_a_thread_while_other_admissions_are_answered(
    server: Server,
) -> None:
    async def scenario() -> tuple[float, Any, float, Any]:
        transport = httpx.ASGITransport(app=create_app(server))
        async with httpx.AsyncClient(transport=transport, base_url="http://gk") as client:
            started = time.monotonic()
            slow = asyncio.create_task(_post(client, pod("train-0", owner=True)))
            await asyncio.sleep(0.05)  # the Job's pod is in its fetch by now
            plain_at, plain = await _post(client, pod("other", owner=False))
            member_at, member = await slow
            return plain_at - started, plain, member_at - started, member

    plain_after, plain, member_after, member = asyncio.run(scenario())
    assert plain["response"]["allowed"]
    assert member["response"]["allowed"] and "patch" in member["response"], member
    patch = json.loads(base64.b64decode(member["response"]["patch"]))
    assert {"name": GATE} in next(op["value"] for op in patch
                                  if op["path"] == "/spec/schedulingGates"), patch
    # The plain pod did not wait for the other admission's GET.
    assert plain_after < SLOW_GET_SECONDS < member_after, (plain_after, member_after)
    assert "gangkeeper_owner_fetches_total 1" in server.metrics.render()
