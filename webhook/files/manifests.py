"""Reading Kubernetes manifests from files, as kubectl would take them.

Multi-document YAML, JSON, and `kind: List` wrappers (what `kubectl get -o yaml`
prints) are flattened into a list of objects, each remembering the file and document
it came from so every error can name them; text read elsewhere (stdin) is parsed the
same under a name it is given (`<stdin>`). Sources that are not manifests yet (an
unrendered Helm template, a chart directory, a kustomization) are refused with a
message saying how to render them. This module reads files and nothing else: no
policy decisions, no API calls.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gangkeeper.policies.errors import ManifestError as ManifestError

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
HELM_CHART_FILES = ("Chart.yaml", "Chart.yml")
#: A Go template action as Helm charts write them ({{ .Values.x }}, {{- include ... }},
#: {{ if }}, {{ $var }}): not YAML a cluster would ever receive. Plain `{{name}}`
#: placeholders (Argo workflow parameters) do not match.
_HELM_ACTION = re.compile(
    r"\{\{-?\s*(\.|\$|/\*|(include|template|if|else|end|range|with|define|toYaml|tpl)\b)"
)
#: Actions only a Helm chart writes. Inside a quoted or block string, Go templates are
#: data for another program (a PrometheusRule's `{{ $labels.namespace }}`, an
#: Alertmanager `{{ template "..." . }}`), and only these say the chart was not rendered.
_HELM_ONLY = re.compile(
    r"\{\{-?\s*(\.(Values|Release|Chart|Capabilities|Files|Template)\b"
    r"|(include|tpl|toYaml|required)\b)"
)
#: Scalar styles that are strings in the source: quoted, literal and folded.
_STRING_STYLES = frozenset({"'", '"', "|", ">"})


@dataclass(frozen=True)
class Document:
    obj: Mapping[str, Any]
    file: str
    #: 1-based position of the document in its file (after `kind: List` expansion the
    #: position of the List, with `item` set).
    index: int
    item: int | None = None

    @property
    def where(self) -> str:
        at = f"{self.file} document {self.index}"
        return at if self.item is None else f"{at} item {self.item}"

    @property
    def ref(self) -> str:
        """`Kind namespace/name` for messages."""
        meta = self.obj.get("metadata") or {}
        ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        return f"{self.obj.get('kind', '?')} {ns + '/' if ns else ''}{name or '?'}"


def _not_manifests(path: Path) -> str:
    """Why a directory or file is a source to render rather than manifests; "" if not."""
    if path.is_dir():
        for name in KUSTOMIZATION_FILES:
            if (path / name).is_file():
                return (
                    f"{path}: a kustomization ({name}), not rendered manifests; render it "
                    f"first: kubectl kustomize {path} > rendered.yaml, then check "
                    "-f rendered.yaml"
                )
        for name in HELM_CHART_FILES:
            if (path / name).is_file():
                return (
                    f"{path}: a Helm chart ({name}), not rendered manifests; render it "
                    f"first: helm template RELEASE {path} > rendered.yaml, then check "
                    "-f rendered.yaml"
                )
        return ""
    if path.name in KUSTOMIZATION_FILES:
        return (
            f"{path}: a kustomization, not rendered manifests; render it first: kubectl "
            f"kustomize {path.parent} > rendered.yaml, then check -f rendered.yaml"
        )
    if path.name in HELM_CHART_FILES:
        return (
            f"{path}: a Helm chart's Chart.yaml, not manifests; render the chart first: "
            f"helm template RELEASE {path.parent} > rendered.yaml"
        )
    return ""


def expand_paths(paths: list[str]) -> list[Path]:
    """Files named directly, plus the manifest files of named directories (sorted)."""
    found, errors = expand_paths_keep_going(paths)
    if errors:
        raise ManifestError(errors[0])
    return found


def expand_paths_keep_going(paths: list[str]) -> tuple[list[Path], list[str]]:
    """The files to read, and one message per path that cannot be read as manifests
    (missing, empty directory, kustomization, Helm chart), so the rest still can."""
    out: list[Path] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        why = _not_manifests(path)
        if why:
            errors.append(why)
        elif path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES)
            if not found:
                errors.append(f"{raw}: directory holds no .yaml, .yml or .json files")
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            errors.append(f"{raw}: no such file or directory")
    return out, errors


def _unrendered_action(text: str) -> re.Match[str] | None:
    """The first Go template action that makes `text` a template, not manifests: any
    one when the text is not YAML, else one outside a quoted or block string (in a
    plain scalar, a key, or the structure itself), or a Helm-only one inside one."""
    actions = list(_HELM_ACTION.finditer(text))
    if not actions:
        return None
    strings: list[tuple[int, int]] = []
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            # The parser always sets both marks; the stubs allow None.
            start, end = event.start_mark, event.end_mark
            is_string = isinstance(event, yaml.ScalarEvent) and event.style in _STRING_STYLES
            if is_string and start is not None and end is not None:
                strings.append((start.index, end.index))
    except yaml.YAMLError:
        return actions[0]
    # Scalars come in document order and never overlap: the string an action may be
    # in is the last one starting at or before it (a rendered monitoring chart holds
    # thousands of both).
    starts = [start for start, _ in strings]
    for action in actions:
        at = bisect.bisect_right(starts, action.start()) - 1
        inside = at >= 0 and action.start() < strings[at][1]
        if not inside or _HELM_ONLY.match(text, action.start()):
            return action
    return None


def _parse(path: Path) -> Iterator[tuple[int, object]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc
    return _parse_text(text, str(path), json_text=path.suffix == ".json")


def _parse_text(text: str, name: str, *, json_text: bool) -> Iterator[tuple[int, object]]:
    action = _unrendered_action(text)
    if action is not None:
        line = text.count("\n", 0, action.start()) + 1
        raise ManifestError(
            f"{name} line {line}: an unrendered Helm template ({action.group(0)}...); "
            "render the chart first: helm template RELEASE CHART > rendered.yaml, then "
            "check -f rendered.yaml"
        )
    return _parse_json(text, name) if json_text else _parse_yaml(text, name)


def _parse_json(text: str, name: str) -> Iterator[tuple[int, object]]:
    try:
        yield 1, json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{name}: not valid JSON: {exc}") from exc


def _parse_yaml(text: str, name: str) -> Iterator[tuple[int, object]]:
    try:
        # Enumerate lazily so an error names the document it happened in.
        index = 0
        for index, doc in enumerate(yaml.safe_load_all(text), start=1):
            yield index, doc
    except yaml.YAMLError as exc:
        raise ManifestError(f"{name} document {index + 1}: not valid YAML: {exc}") from exc


def _check_object(obj: object, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise ManifestError(f"{where}: expected a Kubernetes object, got {type(obj).__name__}")
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj.get(key):
            raise ManifestError(f"{where}: missing or invalid {key}")
    return obj


#: How records and messages name manifests read from standard input (`-f -`).
STDIN_NAME = "<stdin>"


def load_documents(path: Path | str) -> list[Document]:
    """Every object in one file, `kind: List` expanded; empty documents skipped."""
    path = Path(path)
    return _documents(_parse(path), str(path), str(path.parent))


def load_text(text: str, name: str = STDIN_NAME) -> list[Document]:
    """Every object in YAML (or JSON, which is YAML) read elsewhere, named `name`."""
    return _documents(_parse_text(text, name, json_text=False), name, "DIR")


def _documents(
    parsed: Iterator[tuple[int, object]], name: str, directory: str
) -> list[Document]:
    docs: list[Document] = []
    for index, raw in parsed:
        if raw is None:
            continue
        where = f"{name} document {index}"
        obj = _check_object(raw, where)
        if obj["kind"] == "Kustomization":
            raise ManifestError(
                f"{where}: a Kustomization, not rendered manifests; render it first: "
                f"kubectl kustomize {directory} > rendered.yaml, then check -f rendered.yaml"
            )
        if obj["kind"] == "List" or (obj["kind"].endswith("List") and "items" in obj):
            items = obj.get("items")
            if not isinstance(items, list):
                raise ManifestError(f"{where}: {obj['kind']}.items must be a list")
            for item_no, item in enumerate(items, start=1):
                checked = _check_object(item, f"{where} item {item_no}")
                docs.append(Document(checked, name, index, item_no))
        else:
            docs.append(Document(obj, name, index))
    return docs


def load_all(paths: list[str]) -> list[Document]:
    return [doc for path in expand_paths(paths) for doc in load_documents(path)]


def load_nodes(path: Path | str) -> list[Mapping[str, Any]]:
    """The Node objects of a fleet file; anything else in it is an error."""
    nodes = []
    for doc in load_documents(path):
        if doc.obj.get("kind") != "Node":
            raise ManifestError(f"{doc.where}: expected kind Node, got {doc.obj.get('kind')}")
        nodes.append(doc.obj)
    return nodes


def object_key(
    obj: Mapping[str, Any], default_namespace: str = "default"
) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name) as an OwnerLookup is asked."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""
    ns = meta.get("namespace") if isinstance(meta, Mapping) else None
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(ns or default_namespace),
        name,
    )
