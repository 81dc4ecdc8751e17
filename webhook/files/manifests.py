"""Reading Kubernetes manifests from files, as kubectl would take them.

Multi-document YAML, JSON, and `kind: List` wrappers (what `kubectl get -o yaml`
prints) are flattened into a list of objects, each remembering the file and document
it came from so every error can name them. Sources that are not manifests yet (an
unrendered Helm template, a chart directory, a kustomization) are refused with a
message saying how to render them. This module reads files and nothing else: no
policy decisions, no API calls.
"""

from __future__ import annotations

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


def _parse(path: Path) -> Iterator[tuple[int, object]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc
    action = _HELM_ACTION.search(text)
    if action is not None:
        line = text.count("\n", 0, action.start()) + 1
        raise ManifestError(
            f"{path} line {line}: an unrendered Helm template ({action.group(0)}...); "
            "render the chart first: helm template RELEASE CHART > rendered.yaml, then "
            "check -f rendered.yaml"
        )
    if path.suffix == ".json":
        try:
            yield 1, json.loads(text)
        except json.JSONDecodeError as exc:
            raise ManifestError(f"{path}: not valid JSON: {exc}") from exc
        return
    try:
        # Enumerate lazily so an error names the document it happened in.
        index = 0
        for index, doc in enumerate(yaml.safe_load_all(text), start=1):
            yield index, doc
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path} document {index + 1}: not valid YAML: {exc}") from exc


def _check_object(obj: object, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise ManifestError(f"{where}: expected a Kubernetes object, got {type(obj).__name__}")
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj.get(key):
            raise ManifestError(f"{where}: missing or invalid {key}")
    return obj


def load_documents(path: Path | str) -> list[Document]:
    """Every object in one file, `kind: List` expanded; empty documents skipped."""
    path = Path(path)
    docs: list[Document] = []
    for index, raw in _parse(path):
        if raw is None:
            continue
        where = f"{path} document {index}"
        obj = _check_object(raw, where)
        if obj["kind"] == "Kustomization":
            raise ManifestError(
                f"{where}: a Kustomization, not rendered manifests; render it first: "
                f"kubectl kustomize {path.parent} > rendered.yaml, then check -f rendered.yaml"
            )
        if obj["kind"] == "List" or (obj["kind"].endswith("List") and "items" in obj):
            items = obj.get("items")
            if not isinstance(items, list):
                raise ManifestError(f"{where}: {obj['kind']}.items must be a list")
            for item_no, item in enumerate(items, start=1):
                checked = _check_object(item, f"{where} item {item_no}")
                docs.append(Document(checked, str(path), index, item_no))
        else:
            docs.append(Document(obj, str(path), index))
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
