"""`gangkeeper status`: every gang, its members present/needed, and why it waits.

Lists Pods (all namespaces: pods anywhere use the GPUs a gang waits for) and Nodes,
then runs the controller's own plan over them
(`policies.release.status.gang_status`), so what it prints is what the controller
decides. Works without the controller running.

    gangkeeper status [-n NS | -A] [-o text|json|yaml] [--kubeconfig PATH] [--context NAME]
                      [--config FILE]

Exit codes: 0 printed (even when gangs wait), 2 bad input or the API unreachable.
I/O: reads the kubeconfig / config file and lists Pods and Nodes; writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .cluster_state import add_cluster_arguments, add_namespace_arguments, cluster_state_of
from .exit_codes import EXIT_BAD_INPUT, EXIT_OK


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="list gangs: members present/needed, gated/bound, why each waits",
        description="List gangs with members present/needed, gated and bound counts, "
        "and why each waits, as the gang controller sees them.",
    )
    add_namespace_arguments(parser)
    parser.add_argument(
        "-o", "--output", choices=("text", "json", "yaml"), default="text",
        help="text (default): a table; json or yaml: one record per gang",
    )
    add_cluster_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gangkeeper.policies.release.status import gang_status, render_json, render_text

    state = cluster_state_of(args)
    if state is None:
        return EXIT_BAD_INPUT
    reports = gang_status(state.pods, state.nodes, state.config, time.time(),
                          namespace=args.namespace, requests=state.requests,
                          budgets=state.budgets)
    if args.output == "yaml":
        import json

        import yaml

        # The records of -o json, whatever keys they gain: one shape, two syntaxes.
        yaml.safe_dump(json.loads(render_json(reports)), sys.stdout, sort_keys=False)
        return EXIT_OK
    render = render_json if args.output == "json" else render_text
    sys.stdout.write(render(reports))
    return EXIT_OK
