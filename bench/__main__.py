"""`python -m bench [--quick] [--json FILE] [--out DIR] [--only NAMES]`: all benchmarks.

Runs, in order, the policy-core, webhook and controller benchmarks (each owns its own
setup) and then the three cluster benchmarks, which share one sandbox control plane
(scheduling outcome, pod-create latency, memory — memory last, because it fills the
API server with 50,000 pods). A benchmark that is missing or fails is recorded in the
report with its error; the others still run. Prints the Markdown report, writes it to
`<out>/report.md` (a full run: `docs/bench/report.md`, so the committed report is the
last full run's), the raw figures to `--json` (default `bench/results/results.json`)
and the plots to `<out>/`.

May start and stop sandbox processes (through bench.cluster) and write under --out and
--json; nothing else.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.report import BenchResult, machine, markdown, plot_scheduling, write_json

#: Where a full run writes its report and plots (committed), and where the raw figures
#: and partial runs go (not committed).
DOCS = Path("docs/bench")
RESULTS = Path("bench/results")
#: (name, module, needs the shared sandbox)
BENCHMARKS: tuple[tuple[str, str, bool], ...] = (
    ("policy", "bench.policy", False),
    # The same pod decision and validation with GPUs as DRA devices, against it.
    ("dra", "bench.dra", False),
    ("topology", "bench.topology", False),
    # gangkeeper view's pages rendered from a synthetic cluster, in process.
    ("view", "bench.view", False),
    ("planning", "bench.planning", False),
    ("preemption", "bench.preemption", False),
    ("webhook", "bench.webhook", False),
    ("controller", "bench.controller", False),
    ("sandbox_scale", "bench.sandbox_scale", False),
    # Sandboxes of its own, one per scheduler client setting (no gangkeeper in them).
    ("scheduler_binding", "bench.scheduler_binding", False),
    # Its own sandbox: Karpenter runs beside kwok there (build.sh karpenter).
    ("autoscaling", "bench.autoscaling", False),
    ("scheduling", "bench.scheduling", True),
    ("placement", "bench.placement", True),
    ("create_latency", "bench.create_latency", True),
    # Both backends' preemption trace, on the shared sandbox.
    ("preemption_cluster", "bench.preemption_cluster", True),
    ("memory", "bench.memory", True),
)


def _log(message: str) -> None:
    # Progress goes to stderr so stdout is exactly the Markdown report.
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


#: Position of each selected benchmark, for the "how far along" of the start lines.
_STEPS: dict[str, str] = {}


def run_one(name: str, call: Callable[[], list[dict[str, Any]]]) -> BenchResult:
    """Run one benchmark; any exception becomes a `failed` result, never a crash."""
    started = time.monotonic()
    _log(f"{name} {_STEPS.get(name, '')}: start".replace(" :", ":"))
    try:
        rows = call()
    except Exception as exc:
        _log(f"{name}: failed: {exc}\n{traceback.format_exc()}")
        return BenchResult(
            name=name,
            status="failed",
            seconds=time.monotonic() - started,
            rows=[],
            error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:400]}",
        )
    seconds = time.monotonic() - started
    _log(f"{name}: done in {seconds:.0f} s")
    return BenchResult(name=name, status="ok", seconds=seconds, rows=list(rows), error="")


def _load(module: str) -> Any:
    """The benchmark module, or a string saying why it is missing."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return f"{module} does not exist yet"
        return f"{module} cannot be imported: {exc}"
    except Exception as exc:
        return f"{module} cannot be imported: {type(exc).__name__}: {exc}"


def _call(module: Any, quick: bool, *extra: Any) -> list[dict[str, Any]]:
    return list(module.run(quick, *extra))


def _missing(name: str, why: str) -> BenchResult:
    _log(f"{name}: missing: {why}")
    return BenchResult(name=name, status="missing", seconds=0.0, rows=[], error=why)


def _takes_cluster(module: Any) -> bool:
    """Whether `module.run` accepts the shared sandbox (`run(quick, cluster)`)."""
    try:
        return "cluster" in inspect.signature(module.run).parameters
    except (AttributeError, TypeError, ValueError):
        return False


def run_all(quick: bool, only: set[str] | None = None) -> list[BenchResult]:
    selected = [b for b in BENCHMARKS if only is None or b[0] in only]
    # Run order: the ones without a cluster first, then the cluster ones (as below).
    order = [b for b in selected if not b[2]] + [b for b in selected if b[2]]
    _STEPS.update({b[0]: f"[{i}/{len(order)}]" for i, b in enumerate(order, 1)})
    results: list[BenchResult] = []
    shared: list[tuple[str, str, bool]] = []
    for name, module, needs_cluster in selected:
        loaded = _load(module)
        if needs_cluster or (not isinstance(loaded, str) and _takes_cluster(loaded)):
            # Run later on the one sandbox: starting a control plane costs ~40 s.
            shared.append((name, module, True))
        elif isinstance(loaded, str):
            results.append(_missing(name, loaded))
        else:
            results.append(run_one(name, functools.partial(_call, loaded, quick)))
    cluster_benches = shared
    if cluster_benches:
        results += _run_cluster_benches(quick, cluster_benches)
    return results


def _run_cluster_benches(
    quick: bool, benches: Sequence[tuple[str, str, bool]]
) -> list[BenchResult]:
    from bench.cluster import open_cluster

    results: list[BenchResult] = []
    started = time.monotonic()
    _log("starting the sandbox control plane for the cluster benchmarks")
    try:
        with open_cluster(quick=quick, log=_log) as cluster:
            _log(f"sandbox ready in {cluster.startup_seconds:.0f} s")
            for name, module, _ in benches:
                loaded = _load(module)
                if isinstance(loaded, str):
                    results.append(_missing(name, loaded))
                    continue
                results.append(run_one(name, functools.partial(_call, loaded, quick, cluster)))
    except Exception as exc:
        # The sandbox could not start (or stop): every benchmark not yet run says so.
        done = {r["name"] for r in results}
        error = f"sandbox: {type(exc).__name__}: {' '.join(str(exc).split())[:400]}"
        _log(error)
        for name, _, _ in benches:
            if name not in done:
                results.append(
                    BenchResult(
                        name=name,
                        status="failed",
                        seconds=time.monotonic() - started,
                        rows=[],
                        error=error,
                    )
                )
    return results


def default_out(quick: bool, only: set[str] | None) -> Path:
    """A full run keeps the committed report current; a partial one must not replace it."""
    return RESULTS if quick or only else DOCS


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes; < 5 minutes")
    parser.add_argument(
        "--json",
        type=Path,
        help=f"raw figures (default <--out>/results.json, without --out {RESULTS}/results.json)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help=f"report and plots (default: {DOCS} for a full run, which keeps the committed "
        f"report current; {RESULTS} for --quick or --only)",
    )
    parser.add_argument(
        "--only",
        help="comma-separated subset: " + ",".join(b[0] for b in BENCHMARKS),
    )
    args = parser.parse_args(argv)
    only = None
    if args.only:
        only = {n.strip() for n in args.only.split(",") if n.strip()}
        unknown = only - {b[0] for b in BENCHMARKS}
        if unknown:
            parser.error(f"--only: unknown benchmark(s) {', '.join(sorted(unknown))}")
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    info = machine()
    started = time.monotonic()
    results = run_all(args.quick, only)
    _log(f"all benchmarks done in {time.monotonic() - started:.0f} s")

    out: Path = args.out or default_out(args.quick, only)
    out.mkdir(parents=True, exist_ok=True)
    plots = []
    for result in results:
        if result["name"] == "scheduling" and result["status"] == "ok":
            plot = plot_scheduling(result["rows"], out / "scheduling.png")
            if plot is not None:
                plots.append(plot)
    report = markdown(results, info, command.strip(), plots)
    (out / "report.md").write_text(report)
    raw: Path = args.json or (args.out or RESULTS) / "results.json"
    raw.parent.mkdir(parents=True, exist_ok=True)
    write_json(raw, results, info, command.strip())
    sys.stdout.write(report)
    return 0 if all(r["status"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
