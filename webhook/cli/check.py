"""`gangkeeper check`: the admission policy applied to manifest files, offline.

Reads the manifests and a fleet (a nodes file, or the Nodes of a cluster through a
kubeconfig), runs the same `validate_object` the validating webhook runs, and prints
one record per gang. Exit codes: 0 every gang admitted, 1 any rejected, 2 bad input.
The only I/O here is reading the files and, with --kubeconfig, listing Nodes and Pods.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from gangkeeper.policies.capacity import Capacity
from gangkeeper.policies.config import Config
from gangkeeper.policies.decision import validate_object
from gangkeeper.policies.errors import InvalidConfig, InvalidObject
from gangkeeper.policies.model import KubeObject, OwnerLookup

from ..files.config import ConfigFileError, load_config_file
from ..files.manifests import Document, ManifestError, load_all, load_nodes, object_key

EXIT_ADMITTED, EXIT_REJECTED, EXIT_BAD_INPUT = 0, 1, 2


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="apply the admission policy to manifests offline",
        description=(
            "Apply gangkeeper's feasibility policy to manifests. Exit 0 when every gang is "
            "admitted, 1 when any is rejected, 2 on bad input."
        ),
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="FILE",
        help="manifest file or directory (YAML or JSON, multi-document, kind: List); repeatable",
    )
    fleet = parser.add_mutually_exclusive_group(required=True)
    fleet.add_argument(
        "--nodes", metavar="FILE", help="Node objects (e.g. kubectl get nodes -o yaml)"
    )
    fleet.add_argument(
        "--kubeconfig",
        nargs="?",
        const="",
        metavar="PATH",
        help="read Nodes and bound Pods from a cluster (default: $KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="gangkeeper config YAML (GPU names, pools)"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.set_defaults(run=run)


def _owner_lookup(docs: list[Document]) -> OwnerLookup:
    """Resolve owners (e.g. a TrainJob's runtime) among the objects given together."""
    index: dict[tuple[str, str, str, str], KubeObject] = {}
    for doc in docs:
        api_version, kind, namespace, name = object_key(doc.obj)
        index[(api_version, kind, namespace, name)] = doc.obj
        meta = doc.obj.get("metadata") or {}
        if not (isinstance(meta, Mapping) and meta.get("namespace")):
            # No namespace written: it may be cluster-scoped (ClusterTrainingRuntime).
            index[(api_version, kind, "", name)] = doc.obj

    def lookup(api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return index.get((api_version, kind, namespace, name))

    return lookup


def _capacity_from_cluster(kubeconfig: str, config: Config) -> Capacity:
    from kubernetes import client  # heavy import: only on this path

    from ..kube.client import api_client

    try:
        api = client.CoreV1Api(api_client(kubeconfig or None))
        nodes = api.list_node(_request_timeout=30).items
        pods = api.list_pod_for_all_namespaces(
            field_selector="status.phase!=Succeeded,status.phase!=Failed", _request_timeout=30
        ).items
    except Exception as exc:  # config, TLS, HTTP and connection errors alike
        where = kubeconfig or "the default kubeconfig"
        raise ManifestError(f"cannot read Nodes and Pods through {where}: {exc}") from exc
    serialize = api.api_client.sanitize_for_serialization
    capacity = Capacity.from_nodes([serialize(n) for n in nodes], config)
    for pod in pods:
        if pod.spec and pod.spec.node_name:
            capacity.add_pod_object(serialize(pod))
    return capacity


def _meta(obj: KubeObject, key: str) -> str:
    meta = obj.get("metadata") or {}
    value = meta.get(key) if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def _records(docs: list[Document], capacity: Capacity, config: Config) -> list[dict[str, Any]]:
    lookup = _owner_lookup(docs)
    records: list[dict[str, Any]] = []
    for doc in docs:
        if doc.obj.get("kind") == "Node":
            continue
        try:
            decisions = validate_object(doc.obj, capacity=capacity, lookup=lookup, config=config)
        except InvalidObject as exc:
            raise ManifestError(f"{doc.where} ({doc.ref}): {exc}") from exc
        base = {
            "kind": doc.obj.get("kind"),
            "namespace": _meta(doc.obj, "namespace") or "default",
            "name": _meta(doc.obj, "name"),
        }
        if not decisions:
            records.append(
                base
                | {
                    "gang": None,
                    "minMember": None,
                    "demand": {},
                    "verdict": "admit",
                    "reason": "not a gang",
                    "warnings": [],
                }
            )
        for decision in decisions:
            gang, verdict = decision.gang, decision.verdict
            records.append(
                base
                | {
                    "gang": gang.name,
                    "minMember": gang.min_member,
                    "demand": gang.total_demand(),
                    "verdict": "admit" if verdict.allowed else "reject",
                    "reason": verdict.reason,
                    "warnings": list(verdict.warnings),
                }
            )
    return records


def _print_text(records: list[dict[str, Any]], out: TextIO) -> None:
    for r in records:
        subject = f"{r['kind']} {r['namespace']}/{r['name']}"
        if r["gang"] is None:
            print(f"admit   {subject}: not a gang", file=out)
            continue
        demand = ", ".join(f"{v} {k}" for k, v in sorted(r["demand"].items())) or "no GPUs"
        line = (
            f"{r['verdict']:<7} {subject}: gang {r['gang']} minMember={r['minMember']} ({demand})"
        )
        print(line, file=out)
        if r["reason"]:
            print(f"        {r['reason']}", file=out)
        for warning in r["warnings"]:
            print(f"        warning: {warning}", file=out)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config_file(args.config)
        docs = load_all(args.files)
        if args.nodes is not None:
            capacity = Capacity.from_nodes(load_nodes(args.nodes), config)
        else:
            capacity = _capacity_from_cluster(args.kubeconfig, config)
        records = _records(docs, capacity, config)
    except (ManifestError, ConfigFileError, InvalidObject, InvalidConfig) as exc:
        print(f"gangkeeper check: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.output == "json":
        json.dump(records, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_text(records, sys.stdout)
    return EXIT_REJECTED if any(r["verdict"] == "reject" for r in records) else EXIT_ADMITTED
