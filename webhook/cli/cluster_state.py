"""What `status`, `ungate` and `explain` read before they decide: the config file, a
client for the cluster, and its live Pods and Nodes (all namespaces: pods anywhere
use the GPUs a gang waits for), and, where the config asks through them and the cluster
serves them, the ProvisioningRequests (so the answer is the controller's). Where DRA
devices are published, the ResourceSlices, DeviceClasses, claim templates and claims
too: Nodes and pods then count devices as the controller's do
(`kube.device_state.with_devices`; `check --kubeconfig` and `view` read them through
its `read_devices`).

A user who may list pods only in some namespaces gets those (`kube.live_pods`, as
`gangkeeper view` reads them) and `notes` saying what was left out, not an error.

May touch: the kubeconfig and config files it is given, and the API (lists only).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gangkeeper.policies.errors import ClusterStateError as ClusterStateError
from gangkeeper.policies.settings.config import Config

from ..files.config import ConfigFileError, load_config_file
from ..kube.api import Api, ApiError
from ..kube.client import KubeconfigError, api_client
from ..kube.device_state import with_devices
from ..kube.informer import list_all, list_readable
from ..kube.live_pods import list_live_pods
from ..kube.resources import BUDGETS
from ..kube.rest import Rest


@dataclass(frozen=True)
class ClusterState:
    config: Config
    rest: Rest
    pods: list[Mapping[str, Any]]
    nodes: list[Mapping[str, Any]]
    #: None: not asked for by the config, or not served.
    requests: list[Mapping[str, Any]] | None = None
    #: PodDisruptionBudgets (empty when they may not be read): what preemption spares.
    budgets: list[Mapping[str, Any]] = field(default_factory=list)
    #: What the user may not read that the answer lacks (pods of some namespaces).
    notes: tuple[str, ...] = ()


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig, --context and --config, as every cluster-reading command spells
    them (the first two as kubectl does)."""
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="cluster to ask (default: in-cluster, then $KUBECONFIG or ~/.kube/config)",
    )
    add_context_argument(parser)
    parser.add_argument(
        "--config", metavar="FILE", help="gangkeeper config YAML (GPU names, backend, timeout)"
    )


def add_context_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--context", metavar="NAME",
        help="the kubeconfig context to use (default: its current-context)",
    )


def add_namespace_arguments(parser: argparse.ArgumentParser) -> None:
    """-n/--namespace and -A/--all-namespaces, as `kubectl get` takes them; every
    namespace is the default (a gang waits on GPUs pods anywhere use)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", help="only gangs of this namespace")
    where.add_argument(
        "-A", "--all-namespaces", action="store_true",
        help="gangs of every namespace (the default)",
    )


def read_cluster_state(args: argparse.Namespace) -> ClusterState:
    """The config from `args.config` and the cluster at `args.kubeconfig` (`args.context`)."""
    try:
        config = load_config_file(args.config)
        rest = Rest(api_client(args.kubeconfig, args.context))
    except (ConfigFileError, KubeconfigError) as exc:
        raise ClusterStateError(str(exc)) from exc
    state = read_cluster(rest, config, args.namespace, args.command_prog)
    try:
        config, pods, nodes = with_devices(rest, config, state.pods, state.nodes)
    except ApiError as exc:
        raise ClusterStateError(f"cannot list DRA devices and claims: {exc}") from exc
    return ClusterState(config, rest, pods, nodes, state.requests, state.budgets, state.notes)


@dataclass(frozen=True)
class Read:
    """What `read_cluster` lists (`ClusterState` without the config and client)."""

    pods: list[Mapping[str, Any]]
    nodes: list[Mapping[str, Any]]
    requests: list[Mapping[str, Any]] | None
    budgets: list[Mapping[str, Any]]
    notes: tuple[str, ...]


def read_cluster(api: Api, config: Config, namespace: str | None, command: str) -> Read:
    """The live Pods this user may list (of `namespace` alone where not of every one),
    the Nodes, ProvisioningRequests and budgets; ClusterStateError when what the
    answer rests on cannot be listed (`command` is named in the advice)."""
    try:
        listed = list_live_pods(api, namespace, command)
        nodes = list_all(api, "/api/v1/nodes")
        requests = _requests(api) if config.autoscaling.uses_requests else None
        budgets = list_readable(api, BUDGETS.path)
    except ApiError as exc:
        raise ClusterStateError(f"cannot list pods and nodes: {exc}") from exc
    return Read(listed.pods, nodes, requests, budgets, listed.notes)


def _requests(rest: Api) -> list[Mapping[str, Any]] | None:
    try:
        return list_all(rest, REQUESTS_PATH)
    except ApiError as exc:
        if exc.status == 404:  # not served: the controller uses placeholders
            return None
        raise


#: cluster-autoscaler's ProvisioningRequests, every namespace.
REQUESTS_PATH = "/apis/autoscaling.x-k8s.io/v1/provisioningrequests"


def cluster_state_of(args: argparse.Namespace) -> ClusterState | None:
    """`read_cluster_state` with its notes said on stderr; None when the cluster cannot
    be read, the reason said on stderr (the command then exits EXIT_BAD_INPUT)."""
    try:
        state = read_cluster_state(args)
    except ClusterStateError as exc:
        print(f"{args.command_prog}: {exc}", file=sys.stderr)
        return None
    say_notes(args, state)
    return state


def say_notes(args: argparse.Namespace, state: ClusterState) -> None:
    """What the answer lacks (pods the user may not list), on stderr: an answer from
    part of the cluster must not pass for the whole."""
    for note in state.notes:
        print(f"{args.command_prog}: note: {note}", file=sys.stderr)
