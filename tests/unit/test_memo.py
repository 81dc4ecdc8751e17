"""The one memo mechanism (`gangkeeper.policies.memo`):

- a `BoundedMemo` never holds more than its bound, and the least recently used entry
  (read or written) goes first;
- `lookup` tells a remembered None from nothing remembered;
- an `IdentityMemo` answers only for the very object it was told about, never for an
  equal one, and is bounded the same way;
- no product module keeps a memo of its own (`functools.cache`, `lru_cache`), and the
  one memo at module level is the compiled CEL programs, keyed by expression text.
"""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangkeeper.policies.memo import MISSING, BoundedMemo, IdentityMemo
from gangkeeper.policies.podspec import field_path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bound_holds_and_the_least_recently_used_goes_first() -> None:
    memo: BoundedMemo[str, int] = BoundedMemo(3)
    for i, key in enumerate("abc"):
        memo.put(key, i)
    assert memo.get("a") == 0  # read: "a" is now the most recently used
    memo.put("d", 3)  # full: "b", the least recently used, goes
    assert len(memo) == 3
    assert memo.get("b") is None
    assert [memo.get(k) for k in "acd"] == [0, 2, 3]
    memo.put("c", 20)  # rewritten: most recently used
    memo.put("e", 4)  # "a" is now the oldest: it goes
    assert memo.get("a") is None and memo.get("c") == 20 and len(memo) == 3


def test_share_keeps_the_first_value_and_counts_as_a_use() -> None:
    memo: BoundedMemo[str, list[int]] = BoundedMemo(2)
    first = [1]
    assert memo.share("a", first) is first
    assert memo.share("a", [1]) is first  # equal values are one object
    memo.put("b", [2])
    memo.share("a", [9])  # a use of "a": "b" is the oldest now
    memo.put("c", [3])
    assert memo.get("b") is None and memo.get("a") is first


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers()), max_size=60),
       st.integers(min_value=1, max_value=5))
def test_any_sequence_of_puts_keeps_exactly_the_last_used_keys(
    puts: list[tuple[str, int]], size: int
) -> None:
    memo: BoundedMemo[str, int] = BoundedMemo(size)
    order: list[str] = []
    for key, value in puts:
        memo.put(key, value)
        order = [k for k in order if k != key] + [key]
    kept = order[-size:]
    assert len(memo) == len(kept)
    last = {k: v for k, v in puts}
    assert {k: memo.get(k) for k in kept} == {k: last[k] for k in kept}
    assert all(memo.get(k) is None for k in order[:-size])


def test_lookup_tells_a_remembered_none_from_nothing_remembered() -> None:
    memo: BoundedMemo[str, int | None] = BoundedMemo(2)
    memo.put("none", None)
    assert memo.lookup("none") is None
    assert memo.lookup("other") is MISSING


def test_a_memo_must_hold_something() -> None:
    with pytest.raises(ValueError, match="at least one entry, got 0"):
        BoundedMemo(0)
    with pytest.raises(ValueError, match="at least one entry"):
        IdentityMemo(0)


def test_an_identity_memo_answers_only_for_that_very_object() -> None:
    memo: IdentityMemo[str, str] = IdentityMemo(4)
    pod = {"metadata": {"name": "a"}}
    memo.put("meta", pod, "read")
    assert memo.lookup("meta", pod) == "read"
    assert memo.lookup("chain", pod) is MISSING  # another key about the same object
    assert memo.lookup("meta", {"metadata": {"name": "a"}}) is MISSING  # equal, not it


def test_an_identity_memo_keeps_its_objects_so_their_ids_are_not_reused() -> None:
    memo: IdentityMemo[str, int] = IdentityMemo(8)
    memo.put("k", {"n": 1}, 1)  # the caller keeps no reference
    fresh = [{"n": i} for i in range(100)]  # would reuse a freed id
    assert all(memo.lookup("k", obj) is MISSING for obj in fresh)


def test_an_identity_memo_is_bounded_least_recently_used_first() -> None:
    memo: IdentityMemo[str, int] = IdentityMemo(2)
    a, b, c = object(), object(), object()
    memo.put("k", a, 1)
    memo.put("k", b, 2)
    assert memo.lookup("k", a) == 1  # "a" used: "b" is the oldest
    memo.put("k", c, 3)
    assert len(memo) == 2
    assert (memo.lookup("k", a), memo.lookup("k", b), memo.lookup("k", c)) == (1, MISSING, 3)


def test_concurrent_writers_never_break_the_bound() -> None:
    memo: BoundedMemo[tuple[int, int], int] = BoundedMemo(50)

    def write(t: int) -> None:
        for i in range(2000):
            memo.put((t, i), i)
            memo.get((t, i - 1))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(memo) == 50


def test_no_product_module_keeps_a_memo_of_its_own() -> None:
    found = []
    modules = (p for d in ("policies", "webhook", "certs") for p in (ROOT / d).rglob("*.py"))
    for path in sorted(modules):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "functools":
                found += [f"{path.relative_to(ROOT)}: functools.{a.name}" for a in node.names
                          if a.name in ("cache", "lru_cache")]
            if isinstance(node, ast.Attribute) and node.attr in ("cache", "lru_cache") and (
                    isinstance(node.value, ast.Name) and node.value.id == "functools"):
                found.append(f"{path.relative_to(ROOT)}: functools.{node.attr}")
    assert found == []


#: Module-level memos allowed: a compiled CEL program depends on its expression text
#: alone, so one process-wide memo (bounded) answers every caller alike.
MODULE_MEMOS = {"policies/dra/classes.py: _PROGRAMS"}


def _module_memos(path: Path) -> list[str]:
    found = []
    for node in ast.parse(path.read_text()).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and (
                value.func.id in ("BoundedMemo", "IdentityMemo")):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"{path.relative_to(ROOT)}: {ast.unparse(t)}" for t in targets]
    return found


def test_memos_belong_to_objects_with_a_lifetime_not_to_modules() -> None:
    modules = (p for d in ("policies", "webhook", "certs") for p in (ROOT / d).rglob("*.py"))
    found = {memo for path in sorted(modules) for memo in _module_memos(path)}
    assert found == MODULE_MEMOS


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _path_as_before(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    if _PLAIN.fullmatch(key):
        return f"{base}.{key}" if base else key
    return f'{base}["{key}"]'


@given(st.sampled_from(["", "spec", "spec.containers[0]"]),
       st.one_of(st.integers(min_value=0, max_value=99), st.text(max_size=12),
                 st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)))
def test_field_paths_without_a_memo_are_the_paths_they_were(base: str, key: str | int) -> None:
    assert field_path(base, key) == _path_as_before(base, key)
