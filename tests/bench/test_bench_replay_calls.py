"""The replay driver's write policy: transient failures retried, real refusals recorded."""

from __future__ import annotations

import json

import pytest

from bench.scheduling import Replay, TraceJob


class ScriptedApi:
    """Answers each request with the next status of a script (no API server involved)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.calls: list[tuple[str, str]] = []
        self.bodies: list[tuple[str, bytes | None]] = []

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        self.calls.append((method, path))
        self.bodies.append((content_type, body))
        status = self.statuses.pop(0)
        if status == 0:
            raise ConnectionResetError("connection reset by peer")
        return status, b'{"message": "scripted"}'


def replay(api: ScriptedApi) -> Replay:
    job = TraceJob("job-000", 0.0, members=1, gpus_per_member=1, duration=1.0)
    return Replay(None, api, "ns", [job], run_id="r", fleet="f", horizon=10.0)


@pytest.mark.parametrize(
    ("statuses", "errors", "retries"),
    [
        ([201], 0, 0),
        ([503, 201], 0, 1),
        ([0, 201], 0, 1),
        ([500, 409], 0, 1),  # the first attempt landed; its answer was lost
        ([429, 429, 429, 429], 1, 4),
        ([400], 1, 0),  # refused by admission: a result, not retried
        ([409], 1, 0),  # a name clash on the first try is a real error
    ],
)
def test_creates_retry_transient_failures_only(
    statuses: list[int], errors: int, retries: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bench.scheduling.time.sleep", lambda _s: None)
    api = ScriptedApi(list(statuses))
    driver = replay(api)
    driver._create({"metadata": {"name": "job-000"}})
    assert len(driver.errors) == errors
    assert driver.retries == retries
    assert all(call == ("POST", "/apis/batch/v1/namespaces/ns/jobs") for call in api.calls)


def test_a_members_run_starts_with_its_trace_duration_as_kwoks_completion_delay() -> None:
    api = ScriptedApi([200])
    driver = replay(api)
    driver._start_run("job-000", "job-000-0-abcde")
    assert api.calls == [("PATCH", "/api/v1/namespaces/ns/pods/job-000-0-abcde")]
    content_type, body = api.bodies[0]
    assert content_type == "application/merge-patch+json"
    assert json.loads(body or b"") == {
        "metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "1000ms"}}
    }
    assert driver.errors == []
