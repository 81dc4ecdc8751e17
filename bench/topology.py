"""Topology-preferred packing: what packing a gang into the fewest domains costs.

`python -m bench.topology [--quick]` builds fleets of racks (node label
`example.com/rack`; two of every three nodes with 8 free GPUs, the third with 4) and a
gang of 8-GPU members that needs several racks, then times, in the same process:

- `fewest_domains(members, nodes, key)` (`policies.assigner.domains`): the
  assignment over the fewest racks, what a `gangkeeper.io/topology-preferred` gang gets;
- the baseline, `assign(members, nodes)` over every node (no topology).

Each row: the median milliseconds of both, their ratio, and the racks each assignment
uses. Target: the ratio stays within a small factor (packing is asked once per release,
never while a gang waits without room), and fewer racks than the baseline.

`run(quick)` returns the rows for `python -m bench`; the module prints a Markdown table.
Touches nothing outside this process.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from gangkeeper.policies.assigner import Assignment, Member, NodeView, assign, fewest_domains
from gangkeeper.policies.assigner.domains import domains_used

KEY = "example.com/rack"
GPU = "nvidia.com/gpu"
#: (racks, nodes per rack, members of 8 GPUs)
CASES = ((4, 4, 8), (16, 4, 12), (32, 8, 40))
QUICK_CASES = ((4, 4, 8), (16, 4, 12))


def fleet(racks: int, per_rack: int) -> list[NodeView]:
    return [
        NodeView(
            name=f"r{r:02d}-n{i}",
            labels={KEY: f"r{r:02d}"},
            taints=(),
            free={GPU: 8 if (r + i) % 3 else 4, "pods": 110},
        )
        for r in range(racks)
        for i in range(per_rack)
    ]


def _median_ms(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def run(quick: bool) -> list[dict[str, Any]]:
    repeats = 5 if quick else 15
    rows: list[dict[str, Any]] = []
    for racks, per_rack, count in QUICK_CASES if quick else CASES:
        nodes = fleet(racks, per_rack)
        gang = [Member(f"m{i}", {GPU: 8, "pods": 1}) for i in range(count)]
        packed, spread = fewest_domains(gang, nodes, KEY), assign(gang, nodes)
        # A benchmark of the wrong answer is worthless.
        assert isinstance(packed, Assignment) and isinstance(spread, Assignment)
        fewest = _median_ms(lambda: fewest_domains(gang, nodes, KEY), repeats)  # noqa: B023
        every = _median_ms(lambda: assign(gang, nodes), repeats)  # noqa: B023
        rows.append({
            "case": f"{racks} racks x {per_rack} nodes, {count} x 8 GPUs",
            "fewest_domains_ms": round(fewest, 2),
            "assign_all_ms": round(every, 2),
            "ratio": round(fewest / every, 2) if every else None,
            "racks_fewest": domains_used(packed, nodes, KEY),
            "racks_all": domains_used(spread, nodes, KEY),
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    rows = run(parser.parse_args().quick)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("| " + " | ".join("---" for _ in keys) + " |")
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
