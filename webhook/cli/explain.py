"""`gangkeeper explain POD|KIND/NAME`: why one gang waits, like `kubectl describe`.

Lists Pods and Nodes (all namespaces: pods anywhere use the GPUs a gang waits for)
and the Events of the gang's namespace, then runs the controller's own plan over them
(`policies.release.explain`): members present and needed, what the gang asks for and
the free GPUs it was compared with, the older gangs holding nodes it may use, its
pods, and the Events about them or their owner.

    gangkeeper explain POD | pod/NAME | jobset/NAME | pytorchjob/NAME ... [-n NS]

Exit codes: 0 explained, 1 not a gang, 2 bad input or the API unreachable.
I/O: reads the kubeconfig / config file, lists Pods, Nodes and Events; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .cluster_state import (
    ClusterStateError,
    add_cluster_arguments,
    read_cluster_state,
    say_notes,
)
from .exit_codes import EXIT_BAD_INPUT, EXIT_NOT_A_GANG, EXIT_OK


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "explain",
        help="why a gang waits: members, capacity, held nodes, Events",
        description="Describe the gang of a pod or a workload the way `kubectl describe` "
        "would: members present and needed, the GPUs it asks for and the free GPUs it was "
        "compared with, the nodes older gangs hold, its pods and Events.",
    )
    parser.add_argument("target", metavar="POD|KIND/NAME", help="a gang pod, or its workload")
    parser.add_argument(
        "-n", "--namespace", default="default",
        help="namespace of the pod or workload (default: default)",
    )
    add_cluster_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gangkeeper.policies.release.explain import NotAGang, Target, explain, render

    from ..kube.api import ApiError
    from ..kube.informer import list_all

    try:
        target = Target.parse(args.target, args.namespace)
        state = read_cluster_state(args)
        say_notes(args, state)
        explained = explain(state.pods, state.nodes, state.config, time.time(), target,
                            requests=state.requests, budgets=state.budgets)
        events = list_all(
            state.rest, f"/apis/events.k8s.io/v1/namespaces/{args.namespace}/events"
        )
    except NotAGang as exc:
        print(f"{args.command_prog}: {exc}", file=sys.stderr)
        return EXIT_NOT_A_GANG
    except ClusterStateError as exc:
        print(f"{args.command_prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ApiError as exc:
        print(f"{args.command_prog}: cannot list events: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    names = {name for name, _, _ in explained.members} | {explained.owner.partition("/")[2]}
    about = [e for e in events if (e.get("regarding") or {}).get("name") in names]
    sys.stdout.write(render(explained, about))
    return EXIT_OK
