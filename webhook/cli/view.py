"""`gangkeeper view`: the queue, each gang and the fleet as a web page on loopback.

Reads the cluster with the user's own kubeconfig (so it shows exactly what the user
may list: no in-cluster endpoint, no new permission), re-reads it every `--refresh`
seconds, and serves read-only pages on 127.0.0.1 only. The URL it prints carries a
random token; a request without it gets 403. It opens a browser only with `--open`.

    gangkeeper view [-n NS | -A] [--port N] [--refresh S] [--open]
                    [--kubeconfig PATH] [--context NAME] [--config FILE]

Exit codes: 0 stopped (Ctrl-C), 2 bad input, the API unreachable or the port taken.
I/O: reads the kubeconfig / config file, lists Pods, Nodes, Events; serves loopback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .cluster_state import add_cluster_arguments, add_namespace_arguments
from .exit_codes import EXIT_BAD_INPUT, EXIT_OK


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "view",
        help="a read-only web page: the queue, each gang, the fleet (loopback only)",
        description="Serve a read-only web page on 127.0.0.1 that shows why gangs wait: "
        "their place in the queue, each gang's members and Events, and the fleet's GPUs. "
        "It reads the cluster with your kubeconfig; the printed URL carries a token.",
    )
    add_namespace_arguments(parser)
    parser.add_argument(
        "--port", type=int, default=0,
        help="loopback port to serve on (default: a free one, chosen by the system)",
    )
    parser.add_argument(
        "--refresh", type=float, default=5.0, metavar="SECONDS",
        help="seconds between reads of the cluster (default: 5)",
    )
    parser.add_argument(
        "--fleet-nodes", type=int, default=200, metavar="N",
        help="the fleet page draws up to N nodes one by one; above, it sums them per "
        "node shape (default: 200)",
    )
    parser.add_argument("--open", action="store_true", help="open the URL in a web browser")
    add_cluster_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import socket
    import webbrowser

    import uvicorn

    from ..files.config import ConfigFileError, load_config_file
    from ..kube.client import KubeconfigError, api_client
    from ..kube.rest import Rest
    from ..view.server import create_view_app, new_token
    from ..view.source import reader

    if not 0 <= args.port <= 65535:
        print(f"gangkeeper view: --port must be 0..65535, not {args.port}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.refresh <= 0:
        print(f"gangkeeper view: --refresh must be above 0, not {args.refresh}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.fleet_nodes < 1:
        print(f"gangkeeper view: --fleet-nodes must be at least 1, not {args.fleet_nodes}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        config = load_config_file(args.config)
        rest = Rest(api_client(args.kubeconfig, args.context))
    except (ConfigFileError, KubeconfigError) as exc:
        print(f"gangkeeper view: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", args.port))
    except OSError as exc:
        sock.close()
        print(f"gangkeeper view: cannot listen on 127.0.0.1:{args.port}: {exc.strerror}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    token = new_token()
    app = create_view_app(
        reader(rest, config, args.namespace, aggregate_above=args.fleet_nodes), token,
        refresh_seconds=args.refresh, context=args.context or "",
    )
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/?token={token}"
    print(f"gangkeeper view: serving {url}", flush=True)
    print("(read-only, this machine only; Ctrl-C stops it)", flush=True)
    if args.open:
        webbrowser.open(url)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return EXIT_OK
