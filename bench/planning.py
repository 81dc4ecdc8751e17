"""`python -m bench.planning [--sizes 250,1000,5000] [--quick] [-o json]`: CPU of one
controller planning pass, in this process (no sandbox).

For each size N: `bench.load`'s trace of N gangs (10 one-GPU members on average: bare
pods, Indexed Jobs, JobSets, each admitted by the real `decide_pod`) on N 8-GPU nodes
(`bench.planning_state`), planned in the three states a burst goes through:

- `burst`: every member gated, nothing bound — the pass that releases what fits;
- `inflight`: those releases sent (gates lifted, pinned), not bound yet;
- `settled`: bound and Ready, the gangs that did not fit waiting.

Each state is planned by the controller's `Planner`, warm from the passes before (as
in the controller, which hands it the same pod object while a pod does not change),
three ways:

- `first_pass_cpu_s`: the first pass of the state, which sees every pod of the state
  changed at once (the whole burst created, every release applied, every pod bound):
  every gang whose members changed is decided again (the median of `--repeats`, each
  after a pass of the state before);
- `cpu_s`: the median of `--repeats` passes with nothing changed since. In `settled`
  the controller says so (`version`: its stores' generations) and the pass is the
  last plan aged; in the others it promises nothing and the planner finds each gang
  unchanged itself (`reused`: the former);
- `one_change_cpu_s`: a pass after one gang's change, the change the controller sees
  most in that state (a gang arriving; a gang's release applied; a gang bound), from
  the state a moment before it: what a running controller pays pass after pass.

`full_cpu_s` is `plan()` from scratch on the state, the baseline of the same run.
CPU is thread CPU time (other processes on a shared machine do not count), with the
garbage collector paused while a pass is timed.
`matches_full_plan` is true when all three planner passes decided what the
from-scratch plan decides (releases with their pins, every gang's report).

Targets (issue 22) at 1,000: burst ≤ 0.5 s, in-flight ≤ 0.1 s, a pass with nothing
changed ≤ 10 ms; from 250 to 1,000 (4x the size) at most 5x the CPU.

`-o json` prints one record per line: `{"size", "gangs", "pods", "nodes", "state",
"cpu_s", "full_cpu_s", "first_pass_cpu_s", "one_change_cpu_s", "reused",
"first_release_s", "median_release_s", "release_pass_s", "matches_full_plan",
"releases", "waiting"}` (the release figures: thread CPU into the first pass when its
first and median release were decided, and its end; None when it releases nothing).
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


def _log(message: str) -> None:
    print(f"[bench.planning {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr,
          flush=True)


def _one_change(state: str, state_pods: list[PodInfo], before: list[PodInfo]) -> list[PodInfo]:
    """The state a moment before one gang's change, that change being what the
    controller sees most in this state: in `burst` a gang arriving (its members
    created); in `inflight` the last released gang's patches applied (gates lifted,
    pinned); in `settled` it bound. `before`: the pods of the state before."""
    if state == "burst":
        last = state_pods[-1].gang
        return [p for p in state_pods if p.gang != last]
    moved = (lambda p: p.in_flight) if state == "inflight" else (lambda p: bool(p.node_name))
    # The last gang released: before its patches, the gangs released before it were in
    # flight, as when it was decided (its pins are what a pass then decides again).
    gang = [p.gang for p in state_pods if p.gang and moved(p)][-1]
    earlier = {p.uid: p for p in before if p.gang == gang}
    return [earlier.get(p.uid, p) for p in state_pods]


def _first_pass(
    planner: Planner, pods: list[PodInfo], nodes: list[dict[str, Any]], at: float
) -> tuple[float, list[float], Plan]:
    """CPU of one pass, and into it when each release was decided (`on_release`)."""
    gc.collect()
    gc.disable()  # as for every other figure here
    told: list[float] = []
    try:
        started = time.thread_time()
        result = planner.plan(pods, nodes, at,
                              on_release=lambda _: told.append(time.thread_time()))
        cpu = time.thread_time() - started
    finally:
        gc.enable()
    return cpu, [t - started for t in told], result


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
    # As the controller's pod store: a pod unchanged from one state to the next is the
    # object read before (the planner re-decides only what changed).
    store: dict[tuple[str, str], PodInfo] = {}
    state_pods: list[PodInfo] = infos(pods, config, shared, store)
    before: list[PodInfo] = []
    previous: list[PodInfo] = []  # the state the planner saw before this one
    for state in STATES:
        # The state's own instant: pods changed, but not so long that a timeout passed.
        at = now + STATES.index(state)
        # The first pass sees the whole state at once (every pod of it new since the
        # pass before); the passes after it see nothing changed. In `settled` the
        # controller says so (its stores' generations, here the state's name as
        # `version`): the last plan aged. Burst and in-flight promise nothing (None).
        version = state if state == "settled" else None

        def one() -> Plan:
            return planner.plan(state_pods, nodes, at, version=version)  # noqa: B023

        # The first pass, repeated from the state before (median, as every figure).
        firsts = []
        for _ in range(repeats):
            planner.plan(previous, nodes, at)
            firsts.append(_first_pass(planner, state_pods, nodes, at))
        first_cpu = statistics.median(f[0] for f in firsts)
        _, told, first = firsts[-1]
        if version is not None:
            one()  # the first pass the promise is made for plans; the ones after it re-use
        cpu, result = _cpu(one, repeats)
        reused = planner.reused
        # One gang's change, from the state a moment before it (planned, not timed).
        planner.plan(_one_change(state, state_pods, before), nodes, at)
        change_cpu, changed = _cpu(lambda: planner.plan(state_pods, nodes, at), 1)  # noqa: B023
        full_cpu, full = _cpu(
            lambda: plan(state_pods, nodes, config, at), repeats  # noqa: B023
        )
        expected = decisions(full)
        rows.append({
            "size": size, "gangs": len(specs), "pods": len(pods), "nodes": len(nodes),
            "state": state, "cpu_s": round(cpu, 4), "full_cpu_s": round(full_cpu, 4),
            "first_pass_cpu_s": round(first_cpu, 4), "one_change_cpu_s": round(change_cpu, 4),
            "reused": reused,
            # When (thread CPU into the first pass) the first and the median release was
            # decided, and so sent by the controller (`on_release`): not at the end.
            "first_release_s": round(told[0], 4) if told else None,
            "median_release_s": round(statistics.median(told), 4) if told else None,
            "release_pass_s": round(first_cpu, 4) if told else None,
            "matches_full_plan": all(
                decisions(p) == expected for p in (first, result, changed)
            ),
            "releases": len(result.releases),
            "waiting": sum(1 for r in result.reports if r.state == "waiting"),
        })
        _log(f"{size}: {state} first {first_cpu:.3f} s, unchanged {cpu:.3f} s, one change "
             f"{change_cpu:.3f} s ({full_cpu:.3f} s from scratch)")
        before = previous = state_pods
        if state == "burst":
            pods = released(pods, result, at)
        elif state == "inflight":
            pods = bound(pods, nodes)
        state_pods = infos(pods, config, shared, store)
    return rows


def run(quick: bool = False, sizes: tuple[int, ...] | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for size in sizes or (QUICK_SIZES if quick else SIZES):
        rows.extend(measure(size, repeats=1 if size >= 5_000 else 3))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: a row per size and state (CPU of the planner's first pass of the
    state, of a pass with nothing changed, of a pass after one gang's change, and of
    `plan()` from scratch), then the growth of each against the smallest size."""
    lines = [
        "| gangs / nodes | pods | state | first pass (s) | nothing changed (s) "
        "| one gang changed (s) | from scratch (s) | same plan |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in sorted(rows, key=lambda r: (r["size"], STATES.index(r["state"]))):
        lines.append(
            f"| {row['size']:,} | {row['pods']:,} | {row['state']} "
            f"| {row['first_pass_cpu_s']:.3f} | {row['cpu_s']:.4f} "
            f"| {row['one_change_cpu_s']:.4f} | {row['full_cpu_s']:.3f} "
            f"| {'yes' if row['matches_full_plan'] else 'NO'} |"
        )
    sizes = sorted({r["size"] for r in rows})
    if len(sizes) > 1:
        first = {r["state"]: r for r in rows if r["size"] == sizes[0]}
        last = {r["state"]: r for r in rows if r["size"] == sizes[-1]}
        growth = ", ".join(
            f"{s} {last[s]['first_pass_cpu_s'] / max(first[s]['first_pass_cpu_s'], 1e-9):.1f}x"
            for s in STATES
        )
        lines.append("")
        lines.append(f"First pass, {sizes[-1]:,} against {sizes[0]:,} "
                     f"({sizes[-1] / sizes[0]:.0f}x the size): {growth}.")
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
