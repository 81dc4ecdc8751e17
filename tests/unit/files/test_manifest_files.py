"""Reading manifest files: every shape kubectl accepts, and errors that name the place."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangkeeper.webhook.files.manifests import (
    ManifestError,
    expand_paths,
    load_all,
    load_documents,
    load_nodes,
)

JOB = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: a}\n"
NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_multi_document_yaml_gives_each_object_with_its_position(tmp_path: Path) -> None:
    path = write(tmp_path, "m.yaml", JOB + "---\n" + JOB.replace("name: a", "name: b"))
    docs = load_documents(path)
    assert [(d.obj["metadata"]["name"], d.index) for d in docs] == [("a", 1), ("b", 2)]


def test_empty_documents_are_skipped(tmp_path: Path) -> None:
    path = write(tmp_path, "m.yaml", "---\n" + JOB + "---\n---\n")
    assert len(load_documents(path)) == 1


def test_kind_list_is_expanded_with_item_positions(tmp_path: Path) -> None:
    text = "apiVersion: v1\nkind: List\nitems:\n- " + NODE.replace("\n", "\n  ").rstrip() + "\n"
    docs = load_documents(write(tmp_path, "nodes.yaml", text))
    assert [d.obj["kind"] for d in docs] == ["Node"]
    assert docs[0].where.endswith("document 1 item 1")


def test_json_file_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path, "j.json", '{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}}'
    )
    assert load_documents(path)[0].obj["kind"] == "Job"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: [unclosed\n", "document 1: not valid YAML"),
        (JOB + "---\n- just\n- a list\n", "document 2: expected a Kubernetes object"),
        ("kind: Job\nmetadata: {name: a}\n", "document 1: missing or invalid apiVersion"),
        ("apiVersion: v1\nkind: List\nitems: 3\n", "List.items must be a list"),
    ],
)
def test_bad_documents_name_file_and_document(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ManifestError) as err:
        load_documents(path)
    assert str(path) in str(err.value)
    assert fragment in str(err.value)


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.json", "{nope")
    with pytest.raises(ManifestError, match=r"bad\.json: not valid JSON"):
        load_documents(path)


def test_directories_expand_to_their_manifest_files_in_order(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", JOB)
    write(tmp_path, "a.json", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}')
    write(tmp_path, "notes.txt", "ignored")
    assert [p.name for p in expand_paths([str(tmp_path)])] == ["a.json", "b.yaml"]
    assert [d.obj["kind"] for d in load_all([str(tmp_path)])] == ["Pod", "Job"]


def test_missing_path_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no such file"):
        expand_paths([str(tmp_path / "nope.yaml")])


def test_nodes_file_rejects_objects_that_are_not_nodes(tmp_path: Path) -> None:
    path = write(tmp_path, "fleet.yaml", NODE + "---\n" + JOB)
    with pytest.raises(ManifestError, match="document 2: expected kind Node, got Job"):
        load_nodes(path)
