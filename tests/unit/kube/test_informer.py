"""The informer's list+watch protocol against the in-memory `FakeApi` (re-list on 410 Gone).

The fake stands in for the API server's list and watch answers only; the end-to-end
tests never use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builders.polling import wait_for

from gangkeeper.webhook.kube.api import ApiError
from gangkeeper.webhook.kube.fake import FakeApi
from gangkeeper.webhook.kube.informer import Informer, Informers, Store, list_all
from gangkeeper.webhook.kube.resources import PODS

PATH = PODS.path


def obj(name: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, **extra}


def keep(o: Mapping[str, Any]) -> dict[str, Any] | None:
    return None if o.get("gone") else dict(o)


def started(api: FakeApi, page_size: int = 500) -> tuple[Informer, Store[dict[str, Any]]]:
    informer = Informer(api, PODS, page_size=page_size)
    store: Store[dict[str, Any]] = Store(keep)
    informer.subscribe(store)
    informer.start()
    assert informer.synced.wait(5), "never listed"
    return informer, store


def names(store: Store[dict[str, Any]]) -> set[str]:
    return {i["metadata"]["name"] for i in store.items()}


def watched_from(api: FakeApi) -> list[str]:
    return [str(q["resourceVersion"]) for method, _, q in api.calls if method == "WATCH"]


def list_queries(api: FakeApi) -> list[dict[str, Any]]:
    return [q for method, path, q in api.calls if method == "GET" and path == PATH]


def test_list_then_watch_from_the_lists_version_applying_adds_updates_and_deletes() -> None:
    api = FakeApi()
    api.seed(PATH, obj("a"), obj("b"))
    listed_at = str(api.rv)
    informer, store = started(api)
    api.emit(PATH, "ADDED", obj("c"))
    api.emit(PATH, "MODIFIED", obj("a", spec={"x": 1}))
    api.emit(PATH, "DELETED", obj("b"))
    api.bookmark(PATH)
    bookmark = str(api.rv)
    api.end_watch(PATH)
    wait_for(lambda: len(watched_from(api)) == 2, message="watching again", timeout=5)
    informer.stop()
    assert names(store) == {"a", "c"}
    assert next(i for i in store.items() if i["metadata"]["name"] == "a")["spec"] == {"x": 1}
    # Resumed after the stream ended from the bookmark's version, not from the list's.
    assert watched_from(api) == [listed_at, bookmark]


def test_410_gone_lists_again_and_replaces_the_store() -> None:
    api = FakeApi()
    api.seed(PATH, obj("old"))
    first = str(api.rv)
    informer, store = started(api)
    api.forget(PATH, obj("old"))
    api.seed(PATH, obj("new"))
    second = str(api.rv)
    api.break_watch(PATH, {"type": "ERROR", "object": {"code": 410, "reason": "Expired"}})
    wait_for(lambda: informer.relists == 2 and len(watched_from(api)) == 2,
             message="listed again", timeout=5)
    informer.stop()
    assert names(store) == {"new"}
    assert watched_from(api) == [first, second]


def test_a_failed_watch_request_with_410_also_relists() -> None:
    api = FakeApi()
    first = str(api.rv)
    informer, store = started(api)
    api.seed(PATH, obj("p"))
    second = str(api.rv)
    api.break_watch(PATH, ApiError(410, "Gone"))
    wait_for(lambda: len(watched_from(api)) == 2, message="watching again", timeout=5)
    informer.stop()
    assert names(store) == {"p"}
    assert watched_from(api) == [first, second]


def test_a_watch_from_a_compacted_version_lists_again() -> None:
    api = FakeApi()
    informer, store = started(api)
    api.seed(PATH, obj("missed"))
    api.compact()
    api.end_watch(PATH)
    wait_for(lambda: informer.relists == 2, message="listed again", timeout=5)
    informer.stop()
    assert names(store) == {"missed"}


def test_an_older_copy_never_replaces_a_newer_one() -> None:
    store: Store[dict[str, Any]] = Store(dict)
    store.put({"metadata": {"name": "a", "resourceVersion": "30"}, "spec": {"gates": []}})
    # A late watch event:
    store.put({"metadata": {"name": "a", "resourceVersion": "29"}, "spec": {"gates": ["g"]}})
    assert store.items()[0]["spec"] == {"gates": []}


def test_the_generation_moves_with_every_change_a_planner_could_see_and_only_then() -> None:
    # The controller's planner re-uses its last plan while the generation stays: a
    # change it missed would be a gang never released.
    def spec_only(raw: Mapping[str, Any]) -> dict[str, Any]:
        return {"name": raw["metadata"]["name"], "spec": raw.get("spec")}

    def at(version: str, gates: list[str], name: str = "a") -> dict[str, Any]:
        return {"metadata": {"name": name, "resourceVersion": version}, "spec": {"gates": gates}}

    store: Store[dict[str, Any]] = Store(spec_only)
    seen = [store.generation]
    store.put(at("1", ["g"]))  # added
    seen.append(store.generation)
    store.put(at("2", ["g"]))  # status-only: the same for the converter
    seen.append(store.generation)
    store.put(at("3", []))  # gate lifted
    seen.append(store.generation)
    store.put(at("2", ["g"]))  # a stale copy: ignored
    seen.append(store.generation)
    store.put(at("1", [], name="b"))  # another object: a change
    store.relisted(set())  # both gone from a new list: one change
    seen.append(store.generation)
    store.delete(at("4", []))  # already gone: nothing moves
    seen.append(store.generation)
    assert seen == [0, 1, 1, 2, 2, 4, 4]  # b's add, then the relist


def test_objects_the_converter_drops_leave_the_store() -> None:
    api = FakeApi()
    api.seed(PATH, obj("a"))
    informer, store = started(api)
    api.emit(PATH, "MODIFIED", obj("a", gone=True))
    wait_for(lambda: not names(store), message="a dropped", timeout=5)
    informer.stop()


def test_a_list_is_read_page_by_page_following_the_continue_token() -> None:
    api = FakeApi()
    api.seed(PATH, obj("a"), obj("b"), obj("c"), obj("d"), obj("e"))
    informer, store = started(api, page_size=2)
    informer.stop()
    assert names(store) == {"a", "b", "c", "d", "e"}
    queries = list_queries(api)
    assert len(queries) == 3 and "continue" not in queries[0]
    assert all(q.get("continue") for q in queries[1:])
    assert all(q["limit"] == 2 for q in queries)
    assert watched_from(api) == [str(api.rv)]


def test_an_expired_continue_token_starts_the_list_over_without_mixing_pages() -> None:
    api = FakeApi()
    api.seed(PATH, obj("a-stale"), obj("b"))
    api.expire_continue(lambda: api.forget(PATH, obj("a-stale")))
    informer, store = started(api, page_size=1)
    informer.stop()
    assert names(store) == {"b"}
    assert "continue" not in list_queries(api)[2]


def test_a_one_shot_list_reads_every_page() -> None:
    api = FakeApi()
    api.seed(PATH, obj("a"), obj("b"), obj("c"))
    assert [o["metadata"]["name"] for o in list_all(api, PATH)] == ["a", "b", "c"]


def test_subscribers_of_one_resource_share_one_list_and_one_watch() -> None:
    api = FakeApi()
    api.seed(PATH, obj("a"))
    informers = Informers(api)
    first: Store[dict[str, Any]] = Store(keep)
    second: Store[dict[str, Any]] = Store(keep)
    informer = informers.subscribe(PODS, first)
    assert informers.subscribe(PODS, second) is informer
    informers.start()
    assert informer.synced.wait(5)
    api.emit(PATH, "ADDED", obj("b"))
    wait_for(lambda: names(first) == names(second) == {"a", "b"},
             message="both stores fed", timeout=5)
    informers.stop()
    assert len(list_queries(api)) == 1 and len(watched_from(api)) == 1
