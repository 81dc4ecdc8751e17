"""The replay driver's write policy: transient failures retried, real refusals recorded."""

from __future__ import annotations

import urllib.parse

import pytest

from bench.scheduling import Replay, TraceJob


class ScriptedApi:
    """Answers each request with the next status of a script (no API server involved)."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses
        self.calls: list[tuple[str, str]] = []

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        self.calls.append((method, path))
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
    driver._create({"metadata": {"name": "job-000-0"}})
    assert len(driver.errors) == errors
    assert driver.retries == retries
    assert all(call == ("POST", "/api/v1/namespaces/ns/pods") for call in api.calls)


def test_a_teardown_deletes_exactly_the_jobs_pods_with_grace_zero() -> None:
    api = ScriptedApi([200])
    driver = replay(api)
    driver._teardown("job-000")
    method, url = api.calls[0]
    path, _, query = url.partition("?")
    assert (method, path) == ("DELETE", "/api/v1/namespaces/ns/pods")
    assert urllib.parse.parse_qs(query) == {
        "labelSelector": ["bench.gangkeeper.io/run=r,bench.gangkeeper.io/job=job-000"],
        "gracePeriodSeconds": ["0"],
    }
    assert driver.errors == []
