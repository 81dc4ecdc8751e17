"""Hostile AdmissionReview requests for `bench.fuzz`: seeds, and case `i` of seed `s`.

A case is the bytes and headers of one POST to /mutate or /validate. Every case is a
pure function of `(seed, index)` (its own `random.Random`), so a failure found in a run
of 100,000 is replayed alone with `python -m bench.fuzz --seed S --case I`.

Seeds are real reviews: every object in examples/ (each recognised kind) sent to
/validate, and the pods their templates make, as their controllers would own them, sent
to /mutate and /validate. Callers may add more (the HTTP test adds the pods of
`tests/builders`). Strategies, one per case:
  field      one field of a seed's object (walked in order over every seed and path, so
             a bounded run covers every field of every kind) deleted, retyped, or set to
             a giant number or a NaN-like string;
  delete / retype / number / string   the same on any field of the whole review;
  nest       a field (or the whole body) replaced by deep nesting, up to 100,000 levels;
  huge       bodies just under and over the 3 MiB cap, and many small list items;
  bytes      invalid UTF-8, lone surrogates, truncation, flipped bytes;
  content    wrong content types (text/plain, YAML, form, UTF-16, gzip);
  duplicate  duplicate keys written into the JSON text;
  good       the seed unchanged (must be answered as always).

Pure: builds bytes from the seeds it is given (and reads examples/ in `example_seeds`).
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MAX_BODY = 3 * 1024 * 1024

STRATEGIES = ("field", "delete", "retype", "number", "string", "nest", "huge", "bytes",
              "content", "duplicate", "good")
# `field` is every third case so that a few thousand cases walk every field of every seed.
_WEIGHTS = (0, 8, 8, 6, 6, 6, 3, 6, 4, 4, 2)

GIANT_NUMBERS: tuple[Any, ...] = (
    10**30, -(10**30), 2**63, 2**64, -(2**63) - 1, 10**4000, 1e308, -1e308, 5e-324, -0.0,
    0, -1, 2**31, 1.5,
)
#: Raw JSON number tokens json.dumps never writes (Python's json reads all of them).
RAW_NUMBERS = ("NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" * 5000, "1E400",
               "0.0000000000000000000000000001", "123456789012345678901234567890e-10")
NAN_LIKE = ("NaN", "nan", "Infinity", "-Infinity", "inf", "1e999", "-1", "0x10", " 8 ", "",
            "8Gi", "1.5.3", "99999999999999999999999999Ei", "1e-999", "+-1", "١٢", "∞",
            "8\u00a0", "null", "true", "None", "9223372036854775808", "-0", "1/2", "1m",
            "1000000000000000000000000000000000000000000000000000000000000m", "1e", "e10")
ODD_STRINGS = ("", " ", "\u0000", "\t\n", "x" * 70000, "🚀" * 1000, "../../etc/passwd",
               "a/b/c", "default/../kube-system", "\u202e", "'; DROP TABLE pods; --", "%s%n",
               "\\", '"', "ǅ", "KUBE-SYSTEM")


def _other_types(value: Any) -> list[Any]:
    options: list[Any] = [None, True, 0, -1, 1.5, "", "x", [], {}, [None], {"": None}]
    return [o for o in options if type(o) is not type(value)]


@dataclass(frozen=True)
class Seed:
    endpoint: str
    review: Mapping[str, Any]
    label: str


@dataclass
class Case:
    """One request: where, what bytes, which headers, and what was done to make it."""

    index: int
    strategy: str
    endpoint: str
    body: bytes
    what: str
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})


# --- seeds ----------------------------------------------------------------------------


def review(obj: Mapping[str, Any], *, operation: str = "CREATE",
           old: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it for `obj`."""
    api_version = str(obj.get("apiVersion", "v1"))
    group, _, version = api_version.rpartition("/")
    kind = str(obj.get("kind", ""))
    meta = obj.get("metadata") or {}
    resource = {"group": group, "version": version, "resource": kind.lower() + "s"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{kind}/{meta.get('name')}/{operation}")),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": resource,
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": resource,
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace") or "default",
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def _templates(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Every pod template inside a workload (any dict with spec.containers)."""
    if isinstance(obj, Mapping):
        template = obj.get("template")
        if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping) and (
            "containers" in template["spec"]
        ):
            yield template
        for value in obj.values():
            yield from _templates(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _templates(item)


def _pod_of(template: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = dict(template.get("metadata") or {})
    owner_meta = owner.get("metadata") or {}
    name = str(owner_meta.get("name", "w"))
    meta.update(
        generateName=f"{name}-",
        namespace=owner_meta.get("namespace") or "default",
        ownerReferences=[{"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"),
                          "name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                          "controller": True}],
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": copy.deepcopy(dict(template["spec"]))}


def example_seeds() -> list[Seed]:
    seeds: list[Seed] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if path.name == "fleet.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            label = f"{path.stem}:{doc.get('kind')}"
            seeds.append(Seed("validate", review(doc), label))
            seeds.append(Seed("validate", review(doc, operation="UPDATE", old={
                **doc, "spec": {}}), f"{label}:update"))
            for template in _templates(doc):
                pod = _pod_of(template, doc)
                seeds.append(Seed("mutate", review(pod), f"{label}:pod"))
                seeds.append(Seed("validate", review(pod), f"{label}:pod"))
            if doc.get("kind") == "Pod":
                seeds.append(Seed("mutate", review(doc), label))
    return seeds


# --- paths ----------------------------------------------------------------------------

Path_ = tuple[str | int, ...]


def paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every path into `value` (dict keys and list indexes), depth first."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            yield (*prefix, key)
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield (*prefix, i)
            yield from paths(child, (*prefix, i))


def _get(value: Any, path: Path_) -> Any:
    for step in path:
        value = value[step]
    return value


def _set(value: Any, path: Path_, new: Any) -> None:
    _get(value, path[:-1])[path[-1]] = new


def _delete(value: Any, path: Path_) -> None:
    del _get(value, path[:-1])[path[-1]]


def _dotted(path: Path_) -> str:
    return ".".join(str(p) for p in path) or "<root>"


# --- the generator --------------------------------------------------------------------


class Cases:
    """Case `i` of a run with `seed`, over `seeds` (examples/ unless given)."""

    def __init__(self, seed: int, seeds: Sequence[Seed] | None = None) -> None:
        self.seed = seed
        self.seeds = list(seeds) if seeds is not None else example_seeds()
        if not self.seeds:
            raise ValueError("no seed reviews to fuzz")
        # Every (seed, path into request.object): the `field` strategy walks these in order.
        self.fields = [
            (n, ("request", "object", *path))
            for n, s in enumerate(self.seeds)
            for path in paths(s.review["request"]["object"])
        ]

    def case(self, index: int) -> Case:
        rng = random.Random(f"{self.seed}:{index}")
        if index % 3 == 0:
            n, path = self.fields[(index // 3) % len(self.fields)]
            seed = self.seeds[n]
            data = copy.deepcopy(dict(seed.review))
            what = self._mutate_at(rng, data, path)
            return Case(index, "field", seed.endpoint, _dumps(data), f"{seed.label}: {what}")
        strategy = rng.choices(STRATEGIES, _WEIGHTS)[0]
        seed = rng.choice(self.seeds)
        endpoint = seed.endpoint if rng.random() < 0.8 else rng.choice(("mutate", "validate"))
        make: Callable[[random.Random, dict[str, Any]], tuple[bytes, str, Any]]
        make = getattr(self, f"_{strategy}")
        body, what, headers = make(rng, copy.deepcopy(dict(seed.review)))
        case = Case(index, strategy, endpoint, body, f"{seed.label}: {what}")
        if headers is not None:
            case.headers = headers
        return case

    # Each strategy: (rng, a fresh copy of the seed review) -> (body, what, headers|None)

    def _mutate_at(self, rng: random.Random, data: dict[str, Any], path: Path_) -> str:
        op = rng.choice(("delete", "retype", "number", "string"))
        if op == "delete":
            _delete(data, path)
            return f"deleted {_dotted(path)}"
        old = _get(data, path)
        choices: Sequence[Any] = {
            "retype": _other_types(old), "number": GIANT_NUMBERS, "string": NAN_LIKE + ODD_STRINGS,
        }[op]
        new = rng.choice(choices)
        _set(data, path, new)
        return f"{_dotted(path)} = {_short(new)}"

    def _any_path(self, rng: random.Random, data: dict[str, Any]) -> Path_:
        return rng.choice(list(paths(data)))

    def _delete(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        path = self._any_path(rng, data)
        _delete(data, path)
        return _dumps(data), f"deleted {_dotted(path)}", None

    def _retype(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        path = self._any_path(rng, data)
        new = rng.choice(_other_types(_get(data, path)))
        _set(data, path, new)
        return _dumps(data), f"{_dotted(path)} = {_short(new)}", None

    def _number(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        path = self._any_path(rng, data)
        token = rng.choice(RAW_NUMBERS + tuple(str(n) for n in GIANT_NUMBERS[:6]))
        # Written as a raw token, so NaN and 1e999 reach the server's parser as sent.
        marker = "\u0001number\u0001"
        _set(data, path, marker)
        body = _dumps(data).replace(json.dumps(marker).encode(), token.encode())
        return body, f"{_dotted(path)} = {token[:20]}", None

    def _string(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        path = self._any_path(rng, data)
        new = rng.choice(NAN_LIKE + ODD_STRINGS)
        _set(data, path, new)
        return _dumps(data), f"{_dotted(path)} = {_short(new)}", None

    def _nest(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        depth = rng.choice((10, 100, 500, 900, 950, 990, 1000, 1100, 5000, 100000))
        opening, closing = rng.choice(((b'{"a":', b"}"), (b"[", b"]"), (b'{"a":[', b"]}")))
        nested = opening * depth + b"1" + closing * depth
        where: Path_ = () if rng.random() < 0.3 else self._any_path(rng, data)
        if not where:
            return nested, f"the whole body nested {depth} deep", None
        marker = "\u0001nest\u0001"
        _set(data, where, marker)
        body = _dumps(data).replace(json.dumps(marker).encode(), nested)
        return body, f"{_dotted(where)} nested {depth} deep", None

    def _huge(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        request = data["request"]
        obj = request.get("object") if isinstance(request.get("object"), dict) else {}
        kind = rng.choice(("under", "over", "containers", "env", "labels", "string"))
        if kind in ("under", "over"):
            base = len(_dumps(data))
            pad = MAX_BODY - base - 40 + (64 if kind == "over" else 0)
            obj.setdefault("metadata", {})["annotations"] = {"pad": "x" * max(pad, 0)}
        elif kind == "containers":
            spec = obj.setdefault("spec", {})
            spec["containers"] = [{"name": f"c{i}", "image": "i",
                                   "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                                  for i in range(rng.choice((1000, 20000)))]
        elif kind == "env":
            spec = obj.setdefault("spec", {})
            containers = spec.get("containers") or [{"name": "c"}]
            if isinstance(containers, list) and isinstance(containers[0], dict):
                containers[0]["env"] = [{"name": f"E{i}", "value": "v"} for i in range(60000)]
            spec["containers"] = containers
        elif kind == "labels":
            obj.setdefault("metadata", {})["labels"] = {f"k{i}": "v" for i in range(50000)}
        else:
            request["uid"] = "u" * (MAX_BODY - 1000)
        return _dumps(data), f"huge: {kind}", None

    def _bytes(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        body = bytearray(_dumps(data))
        kind = rng.choice(("invalid-utf8", "surrogate", "truncate", "flip", "nul", "bom"))
        at = rng.randrange(len(body))
        if kind == "invalid-utf8":
            body[at:at] = rng.choice((b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80"))
        elif kind == "surrogate":
            marker = b'"uid":"'
            start = body.find(marker)
            body[start + len(marker):start + len(marker)] = b"\\ud800"
        elif kind == "truncate":
            del body[at:]
        elif kind == "flip":
            body[at] ^= 1 << rng.randrange(8)
        elif kind == "nul":
            body[at:at] = b"\x00"
        else:
            body[0:0] = b"\xef\xbb\xbf"
        return bytes(body), f"bytes: {kind} at {at}", None

    def _content(
        self, rng: random.Random, data: dict[str, Any]
    ) -> tuple[bytes, str, dict[str, str]]:
        kind = rng.choice(("text/plain", "yaml", "form", "utf-16", "gzip", "none", "multipart"))
        body = _dumps(data)
        headers = {"content-type": "text/plain"}
        if kind == "yaml":
            body = yaml.safe_dump(data).encode()
            headers = {"content-type": "application/yaml"}
        elif kind == "form":
            body = b"review=" + body
            headers = {"content-type": "application/x-www-form-urlencoded"}
        elif kind == "utf-16":
            body = body.decode().encode("utf-16")
            headers = {"content-type": "application/json; charset=utf-16"}
        elif kind == "gzip":
            body = gzip.compress(body)
            headers = {"content-type": "application/json", "content-encoding": "gzip"}
        elif kind == "none":
            headers = {}
        elif kind == "multipart":
            headers = {"content-type": "multipart/form-data; boundary=x"}
            body = b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n" + body + b"\r\n--x--"
        return body, f"content: {kind}", headers

    def _duplicate(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        text = _dumps(data)
        dup = rng.choice((b'"uid":7,', b'"kind":"Status",', b'"object":null,',
                          b'"operation":"DELETE",', b'"request":[],', b'"namespace":{},',
                          b'"apiVersion":"admission.k8s.io/v1beta1",'))
        key = dup.split(b":", 1)[0] + b":"
        at = text.find(key)
        if at < 0:
            at = 1
        # Before the real key: the last one wins in Python, the first one is the injected.
        body = text[:at] + dup + text[at:] if rng.random() < 0.5 else (
            text[:-1] + b"," + dup[:-1] + b"}")
        return body, f"duplicate {dup.decode()[:-1]}", None

    def _good(self, rng: random.Random, data: dict[str, Any]) -> tuple[bytes, str, None]:
        return _dumps(data), "unchanged", None


def _dumps(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
