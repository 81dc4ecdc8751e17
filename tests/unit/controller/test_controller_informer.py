"""The informer's list+watch protocol against a scripted API (re-list on 410 Gone).

The fake stands in for the HTTP layer only (`Rest.get` of list pages / `Rest.watch`); it
is not an API server and the end-to-end tests never use it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

from gangkeeper.webhook.kube.informer import Informer
from gangkeeper.webhook.kube.rest import ApiError


def obj(uid: str, version: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": version}, **extra}


class ScriptedApi:
    """Answers lists and watches from scripts; records the resourceVersions asked for."""

    def __init__(self, lists: list[Any], watches: list[list[Any]]) -> None:
        # Each entry of `lists` is one list page (or an exception to raise instead).
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str] = []
        self.list_queries: list[dict[str, Any]] = []
        self.done = threading.Event()

    def get(self, path: str, query: Any = ()) -> dict[str, Any]:
        self.list_queries.append(dict(query))
        page = self.lists.pop(0)
        if isinstance(page, Exception):
            raise page
        return dict(page)

    def watch(self, path: str, query: Any, timeout_seconds: int) -> Iterator[Mapping[str, Any]]:
        self.watched_from.append(dict(query)["resourceVersion"])
        if not self.watches:
            self.done.set()
            threading.Event().wait(0.2)
            return
        for event in self.watches.pop(0):
            if isinstance(event, Exception):
                raise event
            yield event


def run(api: ScriptedApi) -> Informer[dict[str, Any]]:
    informer: Informer[dict[str, Any]] = Informer(
        api,  # type: ignore[arg-type]
        "/api/v1/pods",
        lambda o: None if o.get("gone") else dict(o),
        lambda: None,
    )
    informer.start()
    assert api.done.wait(5), "the informer did not get through the script"
    informer.stop()
    return informer


def names(informer: Informer[dict[str, Any]]) -> set[str]:
    return {i["metadata"]["name"] for i in informer.items()}


def test_list_then_watch_from_the_lists_version_applying_adds_updates_and_deletes() -> None:
    api = ScriptedApi(
        lists=[{"metadata": {"resourceVersion": "10"}, "items": [obj("a", "5"), obj("b", "6")]}],
        watches=[[
            {"type": "ADDED", "object": obj("c", "11")},
            {"type": "MODIFIED", "object": obj("a", "12", spec={"x": 1})},
            {"type": "DELETED", "object": obj("b", "13")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}},
        ]],
    )
    informer = run(api)
    assert names(informer) == {"a", "c"}
    assert next(i for i in informer.items() if i["metadata"]["name"] == "a")["spec"] == {"x": 1}
    # Resumed after the stream ended from the bookmark's version, not from the list's.
    assert api.watched_from == ["10", "20"]
    assert informer.synced.is_set()


def test_410_gone_lists_again_and_replaces_the_store() -> None:
    api = ScriptedApi(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": [obj("old", "5")]},
            {"metadata": {"resourceVersion": "90"}, "items": [obj("new", "80")]},
        ],
        watches=[
            [{"type": "ERROR", "object": {"code": 410, "reason": "Expired", "message": "too old"}}],
        ],
    )
    informer = run(api)
    assert names(informer) == {"new"}
    assert informer.relists == 2
    assert api.watched_from == ["10", "90"]


def test_a_failed_watch_request_with_410_also_relists() -> None:
    api = ScriptedApi(
        lists=[
            {"metadata": {"resourceVersion": "10"}, "items": []},
            {"metadata": {"resourceVersion": "50"}, "items": [obj("p", "45")]},
        ],
        watches=[[ApiError(410, "Gone")]],
    )
    informer = run(api)
    assert names(informer) == {"p"}
    assert api.watched_from == ["10", "50"]


def test_an_older_copy_never_replaces_a_newer_one() -> None:
    api = ScriptedApi(lists=[{"metadata": {"resourceVersion": "1"}, "items": []}], watches=[])
    informer: Informer[dict[str, Any]] = Informer(
        api, "/api/v1/pods", dict, lambda: None  # type: ignore[arg-type]
    )
    informer.put(obj("a", "30", spec={"gates": []}))
    informer.put(obj("a", "29", spec={"gates": ["g"]}))  # a late watch event
    assert informer.items()[0]["spec"] == {"gates": []}


def test_objects_the_converter_drops_leave_the_store() -> None:
    api = ScriptedApi(
        lists=[{"metadata": {"resourceVersion": "1"}, "items": [obj("a", "1")]}],
        watches=[[{"type": "MODIFIED", "object": obj("a", "2", gone=True)}]],
    )
    assert names(run(api)) == set()


def page(version: str, token: str, *uids: str) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version, "continue": token},
            "items": [obj(uid, "1") for uid in uids]}


def test_a_list_is_read_page_by_page_following_the_continue_token() -> None:
    api = ScriptedApi(
        lists=[page("7", "t1", "a", "b"), page("7", "t2", "c"), page("7", "", "d")],
        watches=[],
    )
    informer = run(api)
    assert names(informer) == {"a", "b", "c", "d"}
    assert [q.get("continue") for q in api.list_queries] == [None, "t1", "t2"]
    assert all(q["limit"] > 0 for q in api.list_queries)
    assert api.watched_from == ["7"]


def test_an_expired_continue_token_starts_the_list_over_without_mixing_pages() -> None:
    api = ScriptedApi(
        lists=[
            page("7", "t1", "stale"),
            ApiError(410, "Expired"),
            page("9", "", "fresh"),
        ],
        watches=[],
    )
    informer = run(api)
    assert names(informer) == {"fresh"}
    assert api.list_queries[2].get("continue") is None
    assert api.watched_from == ["9"]
