"""`gangkeeper check`: the admission policy applied to manifest files, offline.

Reads the manifests and a fleet (a nodes file, or the Nodes of a cluster through a
kubeconfig), runs the same `validate_object` the validating webhook runs, and prints
one record per gang. Exit codes: 0 every gang admitted, 1 any rejected, 2 bad input.

`-f -` reads manifests from stdin (`helm template ... | gangkeeper check -f -`); their
records name the file `<stdin>`. Text output ends with a count of the verdicts.

A CI gate must not pass by accident: nothing to check, an unrendered Helm template or
kustomization (`files.manifests`), a file or document that cannot be read, a `--nodes`
fleet with no GPU node and no declared pool (unless `--allow-no-gpus`), and two
different training runtimes of one name are bad input (2) — and every readable
document is still reported. The pods of one pod-based gang are summed over the input
(`pod_gangs.siblings_among`) and reported once.

Devices of Dynamic Resource Allocation are counted as extended resources
(`check_dra`): with --nodes, the ResourceSlices and DeviceClasses of that file; with
--kubeconfig, those of the cluster, read as `status` and `explain` read them
(`kube.device_state`), and the cluster's ResourceClaimTemplates and ResourceClaims of
each workload's namespace beside those in the manifests (which win by name). What the
user may not list of resource.k8s.io, or a cluster that does not serve it, leaves the
devices (or the claims) uncounted, as before, with a note on stderr, not exit 2.

The only I/O here is reading the files (and stdin) and, with --kubeconfig, listing
Nodes, Pods and the DRA objects through the `Api` (`capacity_of`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import yaml

from gangkeeper.policies.admission.decision import validate_object
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.dra.resource_names import resource_text
from gangkeeper.policies.errors import InvalidConfig, InvalidObject
from gangkeeper.policies.model import KubeObject, OwnerLookup
from gangkeeper.policies.recognizers.pod_gangs import POD_BASED, siblings_among
from gangkeeper.policies.settings.config import Config

from ..files.config import ConfigFileError, load_config_file
from ..files.manifests import (
    Document,
    ManifestError,
    expand_paths_keep_going,
    load_documents,
    load_text,
    object_key,
)
from ..kube.api import Api
from ..kube.device_state import read_devices
from ..kube.informer import list_all
from . import check_dra
from .exit_codes import EXIT_ADMITTED, EXIT_BAD_INPUT, EXIT_REJECTED


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
        help="manifest file or directory (YAML or JSON, multi-document, kind: List), or - "
        "for stdin; repeatable",
    )
    fleet = parser.add_mutually_exclusive_group(required=True)
    fleet.add_argument(
        "--nodes", metavar="FILE",
        help="Node objects, with any ResourceSlices and DeviceClasses "
        "(e.g. kubectl get nodes,resourceslices,deviceclasses -o yaml)"
    )
    fleet.add_argument(
        "--kubeconfig",
        nargs="?",
        const="",
        metavar="PATH",
        help="read Nodes and bound Pods from a cluster (default: $KUBECONFIG or ~/.kube/config)",
    )
    parser.add_argument(
        "--context", metavar="NAME",
        help="with --kubeconfig: the kubeconfig context to use (default: its current-context)",
    )
    parser.add_argument(
        "-n", "--namespace", default="default",
        help="namespace of the objects that name none, as `kubectl apply -n` would create "
        "them (default: default)",
    )
    parser.add_argument(
        "--allow-no-gpus",
        action="store_true",
        help="check against a --nodes fleet with no GPU node and no declared pool (a "
        "CPU-only fleet: every gang is then admitted with a warning, as the webhook "
        "does); without it such a fleet is bad input, exit 2",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="gangkeeper config YAML (GPU names, pools)"
    )
    parser.add_argument(
        "-o", "--output", choices=("text", "json", "yaml"), default="text",
        help="text (default): one line per gang; json or yaml: one record per gang",
    )
    parser.set_defaults(run=run)


#: Kinds with no namespace (Cluster* kinds are taken as cluster-scoped too).
_CLUSTER_SCOPED = frozenset(
    {
        "Namespace", "Node", "PersistentVolume", "StorageClass", "PriorityClass",
        "CustomResourceDefinition", "APIService", "RuntimeClass", "IngressClass",
        "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "CSIDriver",
        "ResourceFlavor", "NodePool", "EC2NodeClass", "KWOKNodeClass",
    }
)
#: Kinds whose duplicates in the input would silently pick one: each one a TrainJob
#: is resolved with.
_LOOKED_UP = frozenset({"ClusterTrainingRuntime", "TrainingRuntime"})


def _cluster_scoped(kind: object) -> bool:
    return isinstance(kind, str) and (kind in _CLUSTER_SCOPED or kind.startswith("Cluster"))


def _in_namespace(doc: Document, namespace: str) -> Document:
    """The document as `kubectl apply -n NAMESPACE` creates it: a namespaced object
    that names no namespace gets this one."""
    meta = doc.obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    if _cluster_scoped(doc.obj.get("kind")) or meta.get("namespace"):
        return doc
    obj = {**doc.obj, "metadata": {**meta, "namespace": namespace}}
    return dataclasses.replace(doc, obj=obj)


def _owner_lookup(docs: list[Document]) -> OwnerLookup:
    """Resolve owners (e.g. a TrainJob's runtime) among the objects given together."""
    index: dict[tuple[str, str, str, str], KubeObject] = {}
    for doc in docs:
        api_version, kind, namespace, name = object_key(doc.obj)
        index.setdefault((api_version, kind, namespace, name), doc.obj)
        meta = doc.obj.get("metadata") or {}
        if not (isinstance(meta, Mapping) and meta.get("namespace")):
            # No namespace written: it may be cluster-scoped (ClusterTrainingRuntime).
            index.setdefault((api_version, kind, "", name), doc.obj)

    def lookup(api_version: str, kind: str, namespace: str, name: str) -> KubeObject | None:
        return index.get((api_version, kind, namespace, name))

    return lookup


def _duplicates(docs: list[Document]) -> tuple[list[Document], list[str]]:
    """The documents with later copies of a looked-up object left out, and an error
    naming both files for each copy that differs (identical copies are one object)."""
    first: dict[tuple[str, str, str, str], Document] = {}
    kept: list[Document] = []
    errors: list[str] = []
    for doc in docs:
        key = object_key(doc.obj, "" if _cluster_scoped(doc.obj.get("kind")) else "default")
        if doc.obj.get("kind") not in _LOOKED_UP or not key[3]:
            kept.append(doc)
            continue
        earlier = first.get(key)
        if earlier is None:
            first[key] = doc
            kept.append(doc)
        elif earlier.obj != doc.obj:
            errors.append(
                f"{doc.ref} is given twice, differently: {earlier.where} and {doc.where}; "
                "which one a TrainJob uses would be a guess"
            )
    return kept, errors


def _capacity_from_cluster(
    kubeconfig: str, context: str | None, config: Config
) -> tuple[Capacity, check_dra.Fleet]:
    from ..kube.client import api_client
    from ..kube.rest import Rest

    try:
        return capacity_of(Rest(api_client(kubeconfig or None, context)), config)
    except Exception as exc:  # config, TLS, HTTP and connection errors alike
        where = kubeconfig or "the default kubeconfig"
        raise ManifestError(f"cannot read Nodes and Pods through {where}: {exc}") from exc


def capacity_of(api: Api, config: Config) -> tuple[Capacity, check_dra.Fleet]:
    """The cluster's Nodes with their DRA devices, less what its bound live pods hold,
    read through `api`; and the fleet whose config, classes and claims the manifests'
    pods are charged with (`check_dra.with_claims`)."""
    from ..kube.live_pods import LIVE_PODS

    nodes = list_all(api, "/api/v1/nodes")
    devices = read_devices(api, nodes, config.pools)
    config = devices.config(config)
    capacity = Capacity.from_nodes(devices.nodes, config)
    bound = [p for p in list_all(api, "/api/v1/pods", LIVE_PODS)
             if (p.get("spec") or {}).get("nodeName")]  # fmt: skip
    for pod in devices.pods(bound):
        capacity.add_pod_object(pod)
    return capacity, check_dra.Fleet([], config, devices.fewest, devices)


def _meta(obj: KubeObject, key: str) -> str:
    meta = obj.get("metadata") or {}
    value = meta.get(key) if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) else ""


def _subject(obj: KubeObject) -> dict[str, Any]:
    """kind, namespace (None when cluster-scoped) and name ("prefix*" when only
    generateName is given) of a record."""
    kind = obj.get("kind")
    name = _meta(obj, "name") or (
        f"{_meta(obj, 'generateName')}*" if _meta(obj, "generateName") else ""
    )
    namespace = None if _cluster_scoped(kind) else (_meta(obj, "namespace") or "default")
    return {"kind": kind, "namespace": namespace, "name": name}


def _records(
    docs: list[Document], capacity: Capacity, config: Config
) -> tuple[list[dict[str, Any]], list[str]]:
    """One record per gang (a pod-based gang once, for its first pod), and one error
    per document that cannot be read; the other documents are still reported."""
    lookup = _owner_lookup(docs)
    siblings = siblings_among(doc.obj for doc in docs)
    records: list[dict[str, Any]] = []
    errors: list[str] = []
    reported: set[tuple[str, str, str]] = set()
    for doc in docs:
        if doc.obj.get("kind") == "Node":
            continue
        try:
            decisions = validate_object(
                doc.obj, capacity=capacity, lookup=lookup, config=config, siblings=siblings
            )
        except InvalidObject as exc:
            errors.append(f"{doc.where} ({doc.ref}): {exc}")
            continue
        base = _subject(doc.obj) | {"file": doc.file, "document": doc.index}
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
            if gang.recognizer in POD_BASED:
                key = (gang.recognizer, gang.namespace, gang.name)
                if key in reported:
                    continue  # the gang of all its pods was reported with the first
                reported.add(key)
            records.append(
                base
                | {
                    "gang": gang.name,
                    "minMember": gang.min_member,
                    "demand": gang.min_member_demand(),
                    "verdict": "admit" if verdict.allowed else "reject",
                    "reason": verdict.reason,
                    "warnings": list(verdict.warnings),
                }
            )
    return records, errors


def _print_text(records: list[dict[str, Any]], out: TextIO) -> None:
    for r in records:
        where = f"{r['namespace']}/" if r["namespace"] is not None else ""
        subject = f"{r['kind']} {where}{r['name']}"
        if r["gang"] is None:
            print(f"admit   {subject}: not a gang [{r['file']} document {r['document']}]",
                  file=out)
            continue
        demand = ", ".join(
            f"{v} {resource_text(k)}" for k, v in sorted(r["demand"].items())) or "no GPUs"
        # Where it came from, last: the verdict and the gang stay where the eye looks,
        # and a directory's records can still be traced to their file.
        line = (
            f"{r['verdict']:<7} {subject}: gang {r['gang']} minMember={r['minMember']} ({demand})"
            f" [{r['file']} document {r['document']}]"
        )
        print(line, file=out)
        if r["reason"]:
            print(f"        {r['reason']}", file=out)
        for warning in r["warnings"]:
            print(f"        warning: {warning}", file=out)


def _summary(records: list[dict[str, Any]], errors: list[str]) -> str:
    admitted = sum(r["verdict"] == "admit" for r in records)
    rejected = len(records) - admitted
    return (
        f"{admitted} admitted, {rejected} rejected, "
        f"{len(errors)} error{'' if len(errors) == 1 else 's'}"
    )


def _no_gpus(nodes: str, count: int, config: Config) -> str:
    return (
        f"no GPU nodes or pools in {nodes}: {count} Node object(s), none with allocatable "
        f"{', '.join(config.gpu_resources)}, and no pools in the config; every gang would "
        "be admitted unchecked. Pass the GPU nodes (kubectl get nodes -o yaml), set "
        "gpuResources or pools in --config, or --allow-no-gpus for a CPU-only fleet"
    )


def _load_fleet(args: argparse.Namespace, config: Config) -> tuple[Capacity, check_dra.Fleet]:
    if args.context is not None and args.nodes is not None:
        raise ManifestError("--context picks a cluster of --kubeconfig; not with --nodes")
    if args.nodes is None:
        return _capacity_from_cluster(args.kubeconfig, args.context, config)
    fleet = check_dra.read_fleet(load_documents(args.nodes), config)
    capacity = Capacity.from_nodes(fleet.nodes, fleet.config)
    if capacity.unknown and not args.allow_no_gpus:
        raise ManifestError(_no_gpus(args.nodes, len(fleet.nodes), config))
    return capacity, fleet


def _load_manifests(files: list[str]) -> tuple[list[Document], list[str]]:
    """Every document of the files in the order given (`-`: stdin, read once however
    often it is named), and one error per one that cannot be read."""
    docs: list[Document] = []
    errors: list[str] = []
    stdin_read = False
    for name in files:
        if name == "-":
            if not stdin_read:
                stdin_read = True
                try:
                    docs.extend(load_text(sys.stdin.read()))
                except ManifestError as exc:
                    errors.append(str(exc))
            continue
        paths, unreadable = expand_paths_keep_going([name])
        errors.extend(unreadable)
        for path in paths:
            try:
                docs.extend(load_documents(path))
            except ManifestError as exc:
                errors.append(str(exc))
    return docs, errors


def run(args: argparse.Namespace) -> int:
    try:
        capacity, fleet = _load_fleet(args, load_config_file(args.config))
        config = fleet.config
        for note in check_dra.notes(fleet):
            print(f"{args.command_prog}: note: {note}", file=sys.stderr)
    except (ManifestError, ConfigFileError, InvalidObject, InvalidConfig) as exc:
        print(f"{args.command_prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # One bad file or document is reported, and every other one still checked: a CI
    # log then shows all that is wrong at once, and the exit code is still 2.
    docs, errors = _load_manifests(args.files)
    docs = [_in_namespace(doc, args.namespace) for doc in docs]
    docs, duplicated = _duplicates(docs)
    errors.extend(duplicated)
    docs, claims, unreadable_claims = check_dra.take_claims(docs)
    counted = check_dra.narrowed(fleet, claims)
    if counted is not fleet:  # requests narrow their classes: the Nodes counted again
        fleet, capacity = counted, Capacity.from_nodes(counted.nodes, counted.config)
    docs, unreadable_pods = check_dra.with_claims(docs, claims, fleet)
    errors.extend(unreadable_claims + unreadable_pods)
    records, unreadable = _records(docs, capacity, config)
    errors.extend(unreadable)
    if not records and not errors:
        # A wrong path or an empty render must not pass CI as "nothing rejected".
        what = "only Node objects" if docs else "no Kubernetes objects"
        errors.append(f"{what} in {', '.join(args.files)}; nothing to check")
    if args.output == "json":
        json.dump(records, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.output == "yaml":
        yaml.safe_dump(records, sys.stdout, sort_keys=False)
    else:
        _print_text(records, sys.stdout)
        print(_summary(records, errors), file=sys.stdout)
    for error in errors:
        print(f"{args.command_prog}: {error}", file=sys.stderr)
    if errors:
        return EXIT_BAD_INPUT
    return EXIT_REJECTED if any(r["verdict"] == "reject" for r in records) else EXIT_ADMITTED
