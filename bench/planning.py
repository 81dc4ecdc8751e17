"""`python -m bench.planning [--sizes 250,1000,5000] [--quick] [-o json]`: CPU of one
controller planning pass, in this process (no sandbox).

For each size N: `bench.load`'s trace of N gangs (10 one-GPU members on average: bare
pods, Indexed Jobs, JobSets, each admitted by the real `decide_pod`) on N 8-GPU nodes
(`bench.planning_state`), planned in the three states a burst goes through:

- `burst`: every member gated, nothing bound — the pass that releases what fits;
- `inflight`: those releases sent (gates lifted, pinned), not bound yet;
- `settled`: bound and Ready, the gangs that did not fit waiting; nothing changed
  since the pass before, which the controller tells the planner (`version`), so the
  pass is the last plan aged (`Planner`); `first_pass_cpu_s` is the pass just after
  the change, a full one.

Each state is planned by the controller's `Planner`, warm from the pass before (as in
the controller), and by `plan()` from scratch, the baseline of the same run. The CPU
figure is the median of `--repeats` passes (thread CPU time: other processes on a
shared machine do not count). `matches_full_plan` is true when the planner's decisions
(releases with their pins, every gang's report) equal the from-scratch plan's.

Targets (issue 22) at 1,000: burst ≤ 0.5 s, in-flight ≤ 0.1 s, settled ≤ 10 ms; from
250 to 1,000 (4x the size) at most 5x the CPU.

`-o json` prints one record per line: `{"size", "gangs", "pods", "nodes", "state",
"cpu_s", "full_cpu_s", "first_pass_cpu_s", "reused", "first_release_s",
"median_release_s", "release_pass_s", "matches_full_plan"}` (the three release figures
from one more pass of the state, when it releases).
`run(quick)` returns the same records for `python -m bench`. Touches nothing outside this process.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.planning_state import EPOCH, admitted_pods, bound, infos, released, trace
from gangkeeper.policies import Config
from gangkeeper.policies.cluster.observed_gangs import PodInfo
from gangkeeper.policies.cluster.shared_parts import SharedParts
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.release.planner import Planner, decisions
from gangkeeper.policies.release.results import Plan

SIZES = (250, 1_000, 5_000)
QUICK_SIZES = (250,)
STATES = ("burst", "inflight", "settled")


def _cpu(call: Callable[[], Plan], repeats: int) -> tuple[float, Plan]:
    samples, result = [], None
    gc.collect()
    gc.disable()  # a collection inside one sample is noise, not planning
    try:
        for _ in range(repeats):
            started = time.thread_time()
            result = call()
            samples.append(time.thread_time() - started)
    finally:
        gc.enable()
    assert result is not None
    return statistics.median(samples), result


def _release_times(
    planner: Planner, pods: list[PodInfo], nodes: list[dict[str, Any]], at: float
) -> list[float]:
    """Thread CPU seconds from the start of a pass to each release it decides, and to
    its end (the last entry)."""
    started, told = time.thread_time(), []
    planner.plan(pods, nodes, at, on_release=lambda _: told.append(time.thread_time()))
    told.append(time.thread_time())
    return [t - started for t in told]


def _log(message: str) -> None:
    print(f"[bench.planning {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
          flush=True)


def measure(size: int, repeats: int = 3) -> list[dict[str, Any]]:
    """The three states of one size: a record each."""
    config = Config()
    specs, nodes = trace(size)
    pods = admitted_pods(specs, nodes, config)
    shared = SharedParts()
    now = EPOCH + len(pods) * 0.01 + 5.0
    planner = Planner(config)
    planner.plan([], nodes, now)  # the controller knew the nodes before the burst
    rows = []
    state_pods: list[PodInfo] = infos(pods, config, shared)
    for state in STATES:
        # The state's own instant: pods changed, but not so long that a timeout passed.
        at = now + STATES.index(state)
        # The pass before this one saw the previous state, so the first pass of a state
        # is a full one; in `settled` nothing changes after it, and the controller says
        # so (its stores' generations, here the state's name as `version`): the median
        # is a pass with nothing changed. Burst and in-flight promise nothing (None).
        version = state if state == "settled" else None

        def one() -> Plan:
            return planner.plan(state_pods, nodes, at, version=version)  # noqa: B023

        changed_cpu = _cpu(one, 1)[0] if version is not None else None
        cpu, result = _cpu(one, repeats)
        told = _release_times(planner, state_pods, nodes, at) if result.releases else []
        full_cpu, full = _cpu(
            lambda: plan(state_pods, nodes, config, at), repeats  # noqa: B023
        )
        rows.append({
            "size": size, "gangs": len(specs), "pods": len(pods), "nodes": len(nodes),
            "state": state, "cpu_s": round(cpu, 4), "full_cpu_s": round(full_cpu, 4),
            "first_pass_cpu_s": round(cpu if changed_cpu is None else changed_cpu, 4),
            "reused": planner.reused,
            # When (thread CPU into the pass) the first and the median release was
            # decided, and so sent by the controller (`on_release`): not at the end.
            "first_release_s": round(told[0], 4) if told else None,
            "median_release_s": round(statistics.median(told[:-1]), 4) if told else None,
            "release_pass_s": round(told[-1], 4) if told else None,
            "matches_full_plan": decisions(result) == decisions(full),
            "releases": len(result.releases),
            "waiting": sum(1 for r in result.reports if r.state == "waiting"),
        })
        _log(f"{size}: {state} {cpu:.3f} s ({full_cpu:.3f} s from scratch)")
        if state == "burst":
            pods = released(pods, result, at)
        elif state == "inflight":
            pods = bound(pods, nodes)
        state_pods = infos(pods, config, shared)
    return rows


def run(quick: bool = False, sizes: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for size in sizes or (QUICK_SIZES if quick else SIZES):
        rows.extend(measure(size, repeats=1 if size >= 5_000 else 3))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: a row per size, CPU per state, and growth against the smallest size."""
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_size.setdefault(row["size"], {})[row["state"]] = row
    lines = [
        "| gangs / nodes | pods | " + " | ".join(f"{s} (s)" for s in STATES)
        + " | from scratch, burst (s) | vs smallest size, burst | same plan |",
        "| ---: | ---: | " + " | ".join("---:" for _ in STATES) + " | ---: | ---: | --- |",
    ]
    smallest = min(by_size)
    for size, states in sorted(by_size.items()):
        first = by_size[smallest]["burst"]["cpu_s"] or 1e-9
        burst = states["burst"]
        same = all(r["matches_full_plan"] for r in states.values())
        lines.append(
            f"| {size:,} | {burst['pods']:,} | "
            + " | ".join(f"{states[s]['cpu_s']:.3f}" for s in STATES)
            + f" | {burst['full_cpu_s']:.3f} | {burst['cpu_s'] / first:.1f}x "
            f"({size / smallest:.0f}x the size) | {'yes' if same else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the 250 size only")
    parser.add_argument("--sizes", help="comma-separated sizes (gangs = nodes), e.g. 250,1000")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table",
                        help="a Markdown table (default) or one JSON record per line")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else None
    rows = run(args.quick, sizes)
    if args.output == "json":
        for row in rows:
            print(json.dumps(row))
    else:
        print(table(rows))
    # A pass that decides otherwise than from scratch is a bug, not a figure.
    return 0 if all(r["matches_full_plan"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
