"""`gangkeeper sandbox up|down`: a local control plane with gangkeeper registered.

Only parses arguments and prints; the work is in `gangkeeper.webhook.sandbox`
(imported inside `run`, so `gangkeeper --help` stays fast).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

BACKENDS = ("gate", "coscheduling", "volcano", "native")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "sandbox",
        help="run a local control plane with fake GPU nodes and gangkeeper registered",
        description=(
            "Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and "
            "gangkeeper on 127.0.0.1 (no Docker), with the GPU Nodes of a fleet file, and "
            "beside them kwok (which runs the pods bound to those Nodes) and the JobSet and "
            "LeaderWorkerSet controllers. Binaries come from deploy/sandbox/build.sh "
            "(or $GANGKEEPER_K8S_BIN for the control plane)."
        ),
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start the sandbox and print `export KUBECONFIG=...`")
    up.add_argument(
        "--fleet",
        type=Path,
        default=None,
        help="Nodes to create (a `kubectl get nodes -o yaml` file; default: examples/fleet.yaml)",
    )
    up.add_argument(
        "--nodes",
        type=int,
        default=None,
        metavar="N",
        help="instead of a fleet file, N generated kwok Nodes with 8 nvidia.com/gpu each",
    )
    up.add_argument(
        "--components",
        default=None,
        metavar="C,...",
        help="neighbours to run: kwok,jobset,lws,trainer,scheduler-plugins (the default: "
        "all); '' or none for none",
    )
    up.add_argument("--backend", choices=BACKENDS, default=None, help="gangkeeper backend")
    up.add_argument("--config", type=Path, default=None, help="gangkeeper config file")
    up.add_argument("--dir", type=Path, default=Path(".sandbox"), help="state dir (./.sandbox)")
    up.add_argument(
        "--feature-gates",
        default=None,
        metavar="K=V,...",
        help="Kubernetes feature gates for all components, replacing the default "
        "GenericWorkload=true (which serves the native gang API); '' for none",
    )
    up.add_argument(
        "--single-process", action="store_true",
        help="run admission and the gang controller in one `gangkeeper serve` (default: two "
        "processes, `serve --no-controller` and `serve --controller-only`, as the shipped "
        "Deployments run them)",
    )
    up.add_argument(
        "--timeout", type=float, default=180.0, help="seconds to wait for readiness (180)"
    )
    down = actions.add_parser("down", help="stop the sandbox and remove its state")
    down.add_argument("--dir", type=Path, default=Path(".sandbox"), help="state dir (./.sandbox)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gangkeeper.webhook.sandbox import (
        ALL_COMPONENTS,
        DEFAULT_FEATURE_GATES,
        DEFAULT_FLEET,
        BinariesMissing,
        Sandbox,
        SandboxError,
        parse_components,
    )

    from .progress import Progress

    if args.action == "down":
        progress = Progress("sandbox")
        sandbox = Sandbox(args.dir, log=progress)
        progress("stopping every process of the sandbox")
        sandbox.down()
        progress.note(f"stopped; removed the state in {sandbox.directory}")
        progress.finish()
        return 0

    try:
        gates = (
            DEFAULT_FEATURE_GATES
            if args.feature_gates is None
            else parse_feature_gates(args.feature_gates)
        )
    except ValueError as e:
        print(f"gangkeeper sandbox up: --feature-gates: {e}", file=sys.stderr)
        return 2
    try:
        components = (
            ALL_COMPONENTS if args.components is None else parse_components(args.components)
        )
    except ValueError as e:
        print(f"gangkeeper sandbox up: --components: {e}", file=sys.stderr)
        return 2
    if args.nodes is not None and (args.nodes < 0 or args.fleet is not None):
        print(
            "gangkeeper sandbox up: --nodes: takes a count >= 0, and not with --fleet",
            file=sys.stderr,
        )
        return 2
    progress = Progress(
        "sandbox", Sandbox.up_steps(components, single_process=args.single_process)
    )
    sandbox = Sandbox(args.dir, log=progress, feature_gates=gates)

    for option, path in (("--fleet", args.fleet), ("--config", args.config)):
        if path is not None and not path.is_file():
            print(f"gangkeeper sandbox up: {option} {path}: no such file", file=sys.stderr)
            return 2
    try:
        info = sandbox.up(
            fleet=args.fleet or DEFAULT_FLEET,
            node_count=args.nodes,
            backend=args.backend,
            config=args.config,
            components=components,
            timeout=args.timeout,
            single_process=args.single_process,
        )
    except (BinariesMissing, SandboxError) as e:
        progress.finish()
        print(f"gangkeeper sandbox up: {e}", file=sys.stderr)
        return 1
    progress.finish()
    log = progress.note
    split = info.controller_url not in (None, info.gangkeeper_url)
    controller = f" (controller at {info.controller_url})" if split else ""
    log(
        f"up in {info.startup_seconds:.1f}s at {time.strftime('%H:%M:%S')}: {info.server}, "
        f"{len(info.nodes)} nodes, {', '.join(components) or 'no neighbours'}, "
        f"gangkeeper at {info.gangkeeper_url}{controller}, "
        f"logs in {info.directory / 'logs'}"
    )
    log(f"namespace `default` is opted in; stop with `gangkeeper sandbox down --dir {args.dir}`")
    log("why gangs wait, in a browser: `gangkeeper view` (prints a loopback URL)")
    print(f"export KUBECONFIG={info.kubeconfig}")
    # The kubectl of the same release, built beside the control plane: another
    # kubectl on PATH may be outside the one-minor version skew kubectl supports.
    print(f"export PATH={sandbox.binaries.kubectl.parent}:$PATH")
    return 0


def parse_feature_gates(text: str) -> dict[str, bool]:
    """`A=true,B=false` as the Kubernetes components take it."""
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name or value.lower() not in ("true", "false"):
            raise ValueError(f"expected NAME=true|false, got {item!r}")
        gates[name] = value.lower() == "true"
    return gates
