"""`gangkeeper serve`: the admission webhook server (and, with a cluster, the gang controller).

Two modes, chosen by where cluster access comes from:
  - no `--kubeconfig` and not in a pod: the capacity is `--nodes FILE` (default: the
    sample fleet in `examples/`), certificates are issued into `--cert-dir` on first
    start (default: a state directory, `default_cert_dir`, never the working
    directory: in a checkout `./certs` is the `gangkeeper.certs` package), and the
    server answers real AdmissionReviews with no cluster at all;
  - `--kubeconfig PATH` or in-cluster: Nodes, bound pods and owners are watched, and the
    gang controller runs unless `--no-controller` (`--controller-only` runs only it,
    with /healthz and /metrics).

Wires the parts together and runs uvicorn; every decision lives elsewhere.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gangkeeper.policies.errors import UsageError as UsageError
from gangkeeper.policies.names import DEFAULT_NAMESPACE, SERVICE_NAME, WEBHOOK_CONFIGURATIONS

from ..files.config import ConfigFileError, load_config_file

#: Hidden switch for `bench.webhook`: exposes POST /noop, the floor of the stack.
NOOP_ENV = "GANGKEEPER_BENCH_NOOP"
#: What `--cert-mode self` was called before `manifests` and `serve` agreed on `self`;
#: Deployments written then still pass it.
DEPRECATED_SELF = "self-managed"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the admission webhook server",
        description="Serve POST /mutate and /validate (AdmissionReview v1) over HTTPS. "
        "Without a kubeconfig or in-cluster config, capacity comes from --nodes and "
        "certificates are issued into --cert-dir.",
    )
    parser.add_argument("--config", metavar="FILE", help="gangkeeper config (YAML)")
    parser.add_argument(
        "--nodes",
        metavar="FILE",
        help="fleet of Node objects when there is no cluster (default: the sample fleet "
        "examples/fleet.yaml, shipped in the package)",
    )
    parser.add_argument(
        "--owners",
        metavar="FILE",
        action="append",
        default=[],
        help="workload manifests the no-cluster mode answers owner lookups from (repeatable)",
    )
    parser.add_argument("--kubeconfig", metavar="PATH", help="talk to this cluster")
    parser.add_argument(
        "--context", metavar="NAME",
        help="talk to the cluster of this kubeconfig context ($KUBECONFIG or ~/.kube/config "
        "unless --kubeconfig)",
    )
    parser.add_argument("--host", help="listen address (default 127.0.0.1; 0.0.0.0 in a pod)")
    parser.add_argument("--port", type=int, default=8443, help="listen port (default 8443)")
    parser.add_argument(
        "--cert-dir",
        metavar="DIR",
        help="tls.crt/tls.key (and ca.crt) live here; reloaded when they change "
        "(default: $XDG_STATE_HOME/gangkeeper/certs, else ~/.local/state/gangkeeper/certs)",
    )
    parser.add_argument(
        "--cert-mode",
        choices=("auto", "files", "self", "cert-manager", DEPRECATED_SELF),
        default="auto",
        help="self: gangkeeper issues and rotates its certificate in a Secret (needs a "
        "cluster); files: issue local files into --cert-dir; cert-manager: only read the "
        "mounted files; auto (default): self in a pod, else files. "
        f"({DEPRECATED_SELF}: the old name of self, deprecated)",
    )
    parser.add_argument(
        "-n",
        "--namespace",
        default=os.environ.get("POD_NAMESPACE", DEFAULT_NAMESPACE),
        help="gangkeeper's own namespace (controller Lease, certificate Secret)",
    )
    parser.add_argument("--service", default=SERVICE_NAME, help="gangkeeper's Service name")
    parser.add_argument(
        "--client-ca",
        metavar="FILE",
        help="answer /mutate and /validate only for clients whose TLS certificate this CA "
        "signed (the API server presents one through its AdmissionConfiguration "
        "kubeconfig); /healthz, /readyz and /metrics stay open to probes and scrapers",
    )
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"),
        help="least severe level logged (default: info)",
    )
    parser.add_argument(
        "--log-format", choices=("text", "json"),
        help="text: one line for people; json: one object per line, for a log collector "
        "(default: text when stderr is a terminal, else json)",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--no-controller", action="store_true", help="do not run the gang controller"
    )
    group.add_argument(
        "--controller-only",
        action="store_true",
        help="run only the gang controller (with /healthz and /metrics)",
    )
    limits = parser.add_argument_group(
        "request limits", "bounds on each request and connection, like the API server's own"
    )
    defaults = _default_limits()
    for flag, kind, unit, text in (
        ("--max-body-bytes", int, "bytes", "larger request bodies get 413"),
        ("--header-timeout", float, "seconds", "close a connection whose request line and "
         "headers take longer (from connect, or the request's first byte)"),
        ("--body-timeout", float, "seconds", "a body that takes longer gets 408"),
        ("--max-header-bytes", int, "bytes", "larger request heads get 431"),
        ("--idle-timeout", float, "seconds", "close keep-alive connections idle this long "
         "(must outlive the API server's 90 s idle timeout)"),
        ("--max-connections", int, "connections", "past this many open connections, "
         "answer 503"),
    ):
        dest = flag[2:].replace("-", "_")
        default = getattr(defaults, dest)
        metavar = "COUNT" if unit == "connections" else unit.upper()
        limits.add_argument(flag, type=kind, metavar=metavar, default=default,
                            help=f"{text} (default {_readable(default, unit)})")
    parser.add_argument("--enable-noop", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def _readable(value: float, unit: str) -> str:
    """`3 MiB = 3145728 bytes`, `64 KiB = 65536 bytes`, `10 seconds`: for --help."""
    if unit == "bytes":
        for size, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
            if value >= size and value % size == 0:
                return f"{int(value) // size} {name} = {int(value)} bytes"
        return f"{int(value)} bytes"
    return f"{value:g} {unit}" if value < 1e6 else f"{int(value)} {unit}"


def _default_limits() -> Any:
    from ..server.limits import Limits

    return Limits()


def default_cert_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where `serve` keeps its own CA and keys unless told: the XDG state directory
    (`$XDG_STATE_HOME`, if absolute as the spec requires, else ~/.local/state)."""
    state = environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        home = environ.get("HOME")
        state = str((Path(home) if home else Path.home()) / ".local" / "state")
    return Path(state) / "gangkeeper" / "certs"


class _Periodic:
    """Call `fn` now and then every `seconds` in a daemon thread (cert reconcile)."""

    def __init__(self, name: str, fn: Any, seconds: float) -> None:
        self._fn = fn
        self._seconds = seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        import logging

        while not self._stop.wait(self._seconds):
            try:
                self._fn()
            except Exception as exc:
                logging.getLogger(__name__).warning(
                    "periodic task failed", extra={"task": self._thread.name, "error": str(exc)}
                )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()


def _wait_for_files(*paths: Path, timeout: float = 300.0) -> None:
    """cert-manager writes the Secret a moment after the pod starts; wait for it."""
    deadline = time.monotonic() + timeout
    while not all(p.is_file() for p in paths):
        if time.monotonic() > deadline:
            missing = ", ".join(str(p) for p in paths if not p.is_file())
            raise UsageError(f"certificate files never appeared: {missing}")
        time.sleep(1.0)


def _controller_service(api: Any, config: Any, namespace: str, informers: Any) -> Any | None:
    import logging
    import socket

    log = logging.getLogger(__name__)
    try:
        from gangkeeper.webhook.controller import GangController
    except ImportError as exc:
        log.warning(
            "gang controller not available; serving admission only", extra={"error": str(exc)}
        )
        return None
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    return GangController(
        api, config, namespace=namespace, identity=identity, informers=informers,
        devices=informers is not None,
    )


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except UsageError as exc:
        print(f"gangkeeper serve: {exc}", file=sys.stderr)
        return 2


def _sample_fleet() -> Path:
    """`examples/fleet.yaml` as the package ships it (with the sandbox's data)."""
    from gangkeeper.webhook.sandbox import DEFAULT_FLEET

    return DEFAULT_FLEET


def _build_view(
    args: argparse.Namespace, informers: Any | None, config: Any, metrics: Any
) -> Any:
    """The cluster view: a fleet file without a cluster, the shared informers with one."""
    import logging

    from gangkeeper.policies.errors import PolicyError

    from ..files.manifests import ManifestError, load_documents, load_nodes
    from ..server.cluster_view import StaticClusterView, WatchClusterView

    log = logging.getLogger("gangkeeper.serve")
    if informers is None:
        if args.controller_only:
            raise UsageError("--controller-only needs a cluster (--kubeconfig or in-cluster)")
        nodes = Path(args.nodes) if args.nodes else _sample_fleet()
        if not nodes.is_file():
            raise UsageError(
                f"no cluster and no fleet file at {nodes}: pass --nodes FILE "
                "(Node objects, as `kubectl get nodes -o yaml` prints) or --kubeconfig PATH"
            )
        try:
            owners = [doc.obj for path in args.owners for doc in load_documents(Path(path))]
            view = StaticClusterView(load_nodes(nodes), config, owners)
        except (ManifestError, PolicyError, OSError) as exc:
            raise UsageError(str(exc)) from exc
        log.info("serving without a cluster", extra={"nodes": str(nodes)})
        return view
    if args.nodes:
        log.info("--nodes ignored: capacity comes from the cluster")
    if args.controller_only:
        # Only the controller watches; an empty, synced view keeps /readyz honest.
        return StaticClusterView([], config)
    return WatchClusterView(informers, config, on_synced=metrics.set_synced, devices=True)


def _build_tls(args: argparse.Namespace, api: Any, services: list[Any]) -> Any:
    """The reloading TLS context, after making sure certificate files exist."""
    from ..kube.client import in_cluster
    from ..server.tls import CertificateUnavailable, ReloadingTLS

    cert_dir = _cert_dir(args)
    cert_file, key_file = cert_dir / "tls.crt", cert_dir / "tls.key"
    mode = args.cert_mode
    if mode == "auto":
        mode = "self" if in_cluster() else "files"
    if mode == "files":
        from gangkeeper.certs import ensure_local

        try:
            paths = ensure_local(cert_dir, ["localhost"], ["127.0.0.1"])
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise UsageError(f"--cert-dir {cert_dir}: cannot write ({reason})") from exc
        cert_file, key_file = paths.cert, paths.key
    elif mode == "self":
        from gangkeeper import certs

        managed = getattr(certs, "SelfManagedCerts", None)
        if managed is None or api is None:
            raise UsageError(
                "--cert-mode self needs a cluster (--kubeconfig, --context or in-cluster) "
                "and gangkeeper.certs.SelfManagedCerts"
            )
        manager = managed(
            api,
            namespace=args.namespace,
            secret_name=f"{args.service}-tls",
            service_name=args.service,
            webhook_names=list(WEBHOOK_CONFIGURATIONS),
            cert_dir=cert_dir,
        )
        manager.reconcile()
        services.append(_Periodic("cert-reconcile", manager.reconcile, 60.0))
    else:
        _wait_for_files(cert_file, key_file)
    client_ca = Path(args.client_ca) if args.client_ca else None
    if client_ca is not None and not client_ca.is_file():
        raise UsageError(f"--client-ca {client_ca}: no such file")
    try:
        return ReloadingTLS(cert_file, key_file, client_ca)
    except CertificateUnavailable as exc:
        raise UsageError(str(exc)) from exc


def _cert_dir(args: argparse.Namespace) -> Path:
    return Path(args.cert_dir) if args.cert_dir else default_cert_dir()


def _limits(args: argparse.Namespace) -> Any:
    from ..server.limits import Limits

    limits = Limits(
        max_body_bytes=args.max_body_bytes, header_timeout=args.header_timeout,
        body_timeout=args.body_timeout, max_header_bytes=args.max_header_bytes,
        idle_timeout=args.idle_timeout, max_connections=args.max_connections,
    )
    for name, value in vars(limits).items():
        if value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive, got {value:g}")
    return limits


def _log_start(args: argparse.Namespace) -> None:
    """The first line: the version, and where the certificates are (a user looking
    for ca.crt reads it here)."""
    import logging

    from .main import version

    cert_dir = _cert_dir(args)
    logging.getLogger("gangkeeper.serve").info(
        f"gangkeeper {version()} starting; certificates in {cert_dir}",
        extra={"version": version(), "cert_dir": str(cert_dir), "cert_mode": args.cert_mode},
    )


def _run(args: argparse.Namespace) -> int:
    import logging

    import uvicorn

    from ..kube.client import KubeconfigError, in_cluster, serve_client
    from ..kube.device_view import with_device_names
    from ..kube.informer import Informers
    from ..kube.rest import Rest
    from ..server import logs
    from ..server.app import Server, create_app
    from ..server.metrics import Metrics

    log_config = logs.configure(args.log_level, args.log_format or logs.default_format())
    _log_start(args)
    if args.cert_mode == DEPRECATED_SELF:
        logging.getLogger("gangkeeper.serve").warning(
            f"--cert-mode {DEPRECATED_SELF} is deprecated; use --cert-mode self"
        )
        args.cert_mode = "self"
    limits = _limits(args)
    try:
        config = load_config_file(args.config)
    except ConfigFileError as exc:
        raise UsageError(f"--config {exc}") from exc
    try:
        api = serve_client(args.kubeconfig, args.context)
    except KubeconfigError as exc:
        raise UsageError(str(exc)) from exc
    metrics = Metrics()
    # One list+watch per resource for the whole process: the cluster view and the
    # controller subscribe to the same informers.
    informers = Informers(Rest(api)) if api is not None else None
    # Admission counts DRA devices as `dra:<class>` GPUs (kube/device_view.py); the
    # controller is given the config as written.
    admission_config = with_device_names(config) if informers is not None else config
    view = _build_view(args, informers, admission_config, metrics)
    services: list[Any] = []
    if api is not None and not args.no_controller:
        controller = _controller_service(api, config, args.namespace, informers)
        if controller is not None:
            services.append(controller)
            if callable(getattr(controller, "metric_samples", None)):
                metrics.add_collector(controller.metric_samples)
            timings = getattr(controller, "timings", None)
            if timings is not None:
                metrics.add_collector(timings.samples)
    # --controller-only serves /healthz and /metrics over the same TLS, so probes and
    # scrapers need no second configuration.
    tls = _build_tls(args, api, services)
    if informers is not None:
        # Last, so every subscriber is in before the first list; stopped first.
        services.append(informers)
    server = Server(
        config=admission_config,
        limits=limits,
        view=view,
        metrics=metrics,
        tls=tls,
        services=services,
        cert_file=tls.cert_file if tls is not None else None,
        admission=not args.controller_only,
        require_client_cert=bool(args.client_ca),
        namespace=args.namespace if api is not None else "",
        noop=args.enable_noop or os.environ.get(NOOP_ENV) == "1",
    )
    uv_config = uvicorn.Config(
        create_app(server),
        host=args.host or ("0.0.0.0" if in_cluster() else "127.0.0.1"),
        port=args.port,
        log_config=log_config,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        **limits.uvicorn_options(),
        ssl_context_factory=(lambda _cfg, _default: tls.server_context) if tls else None,
    )
    uvicorn.Server(uv_config).run()
    return 0
