"""DRA benchmark: a pod decision and a workload validation when GPUs are DRA devices.

`python -m bench.dra [--quick]` builds, in one process, the fleet of `bench.policy`
(the same 16 shapes of labels and taints, a third of the nodes partly used) twice at
5,000 nodes (1,000 with --quick):

- **extended resources**: the GPUs on each Node's `allocatable` (`nvidia.com/gpu`), the
  PyTorchJob's members asking 8 each in their limits, as `bench.policy` times them;
- **DRA**: no GPU on the Nodes; one ResourceSlice of 8 devices per node (driver
  `gpu.example.com`, resource.k8s.io/v1), a DeviceClass selecting them by CEL, and the
  members asking 8 devices through a ResourceClaimTemplate. The webhook's path is timed
  whole: `DeviceView.with_claims` (claims to device limits) on the pod and, through
  `DeviceView.owners`, on its owner, then `decide_pod`; `with_claims` on the
  PyTorchJob, then `validate_object`.

Each row: the median (and p99, thread CPU) of both kinds over many iterations, and
their ratio. Target: DRA ≤ 2x the extended-resource figure of the same run. The time
to pass every Node on with its devices (what a ResourceSlice or DeviceClass change
costs the view) is reported once per kind of fleet.

`run(quick)` returns the rows for `python -m bench`; the module prints a Markdown table.
Touches nothing outside this process (no files, no network).
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from bench.policy import GPU, JOB, POD, lookup, make_capacity, make_node, measure, one_core
from gangkeeper.policies import Capacity, Config, KubeObject, decide_pod, validate_object
from gangkeeper.policies.admission.decision import Memos
from gangkeeper.webhook.kube.device_view import DeviceView, with_device_names
from gangkeeper.webhook.kube.informer import object_key

NODES, QUICK_NODES = 5_000, 1_000
DRIVER = CLASS = "gpu.example.com"
DEVICES = 8
TEMPLATE = "eight-gpus"
#: What the report holds DRA to, against extended resources in the same run.
TARGET_RATIO = 2.0


def _with_claims(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A pod spec asking 8 devices through the claim template instead of 8 GPUs."""
    out = copy.deepcopy(dict(spec))
    container = out["containers"][0]
    del container["resources"]["limits"][GPU]
    container["resources"]["claims"] = [{"name": "gpus"}]
    out["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": TEMPLATE}]
    return out


DRA_POD: dict[str, Any] = {**POD, "spec": _with_claims(POD["spec"])}
DRA_JOB: dict[str, Any] = copy.deepcopy(JOB)
for _replica in DRA_JOB["spec"]["pytorchReplicaSpecs"].values():
    _replica["template"] = {"spec": _with_claims(_replica["template"]["spec"])}

DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": CLASS},
                "spec": {"selectors": [{"cel": {
                    "expression": f"device.driver == '{DRIVER}'"}}]}}  # fmt: skip
CLAIM_TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": TEMPLATE, "namespace": "team-a"},
                  "spec": {"spec": {"devices": {"requests": [
                      {"name": "gpus", "exactly": {"deviceClassName": CLASS,
                                                   "count": DEVICES}}]}}}}  # fmt: skip


def resource_slice(node: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}",
                                  "attributes": {"productName": {"string": "H100"}}}
                                 for i in range(DEVICES)]}}  # fmt: skip


class _Capacity:
    """The DeviceView's sink: a `Capacity` fed the Nodes it passes on."""

    def __init__(self, config: Config) -> None:
        self.capacity = Capacity(config)

    def upsert(self, node: Mapping[str, Any]) -> None:
        self.capacity.upsert_node(node)

    def delete(self, node: Mapping[str, Any]) -> None:
        self.capacity.delete_node(str(node["metadata"]["name"]))

    def relisted(self, keys: set[str]) -> None:
        pass


def dra_view(nodes: int, config: Config) -> tuple[DeviceView, Capacity, float]:
    """(the view, its capacity, seconds to pass every Node on with its devices)."""
    sink = _Capacity(config)
    view = DeviceView(sink)
    listed = [make_node(i) for i in range(nodes)]
    for node in listed:
        del node["status"]["allocatable"][GPU]  # its GPUs are in its slice only
        view.upsert(node)
    view.relisted({object_key(n) for n in listed})
    slices = [resource_slice(n["metadata"]["name"]) for n in listed]
    for store, objects in ((view.slices, slices), (view.templates, [CLAIM_TEMPLATE]),
                           (view.claims, [])):
        for obj in objects:
            store.upsert(obj)
        store.relisted({object_key(o) for o in objects})
    view.classes.upsert(DEVICE_CLASS)
    start = time.perf_counter()
    view.classes.relisted({object_key(DEVICE_CLASS)})  # every Node passes on once here
    refresh = time.perf_counter() - start
    for index, node in enumerate(listed):
        if index % 3 == 1:  # as bench.policy: a third of the nodes run something
            sink.capacity.add_pod(f"busy-{index}", node["metadata"]["name"],
                                  {f"dra:{CLASS}": 1 + index % DEVICES})
    return view, sink.capacity, refresh


def _cases(view: DeviceView | None, capacity: Capacity, config: Config, memos: Memos
           ) -> dict[str, Callable[[], object]]:
    if view is None:
        owners: Callable[[str, str, str, str], KubeObject | None] = lookup
        pod: Callable[[], KubeObject] = lambda: POD  # noqa: E731
        job: Callable[[], KubeObject] = lambda: JOB  # noqa: E731
    else:
        dra = view
        owners = dra.owners(lambda *key: DRA_JOB if lookup(*key) is not None else None)
        pod = lambda: dra.with_claims(DRA_POD, "team-a")[0]  # noqa: E731
        job = lambda: dra.with_claims(DRA_JOB, "team-a")[0]  # noqa: E731
    decide = functools.partial(decide_pod, namespace="team-a", capacity=capacity,
                               lookup=owners, config=config, memos=memos)
    validate = functools.partial(validate_object, capacity=capacity, lookup=owners,
                                 config=config, memos=memos)
    return {"pod decision": lambda: decide(pod()), "workload validation": lambda: validate(job())}


def _check(cases: Mapping[str, Callable[[], Any]]) -> None:
    """A benchmark of the wrong answer is worthless: recognised, admitted, 3 members
    of 8 GPUs (or devices) each."""
    decision = cases["pod decision"]()
    assert decision.membership is not None and decision.patched is not None, decision
    [validated] = cases["workload validation"]()
    assert validated.verdict.allowed and validated.gang.size == 3, validated
    assert sum(validated.gang.total_demand().values()) == 24, validated.gang


def run(quick: bool) -> list[dict[str, Any]]:
    """Rows for the report: one per case, both kinds of fleet side by side."""
    nodes = QUICK_NODES if quick else NODES
    iterations, warmup = (300, 30) if quick else (2_000, 200)
    config = Config()
    dra_config = with_device_names(config)
    start = time.perf_counter()
    extended_capacity = make_capacity(nodes, config)
    extended_build = time.perf_counter() - start
    view, dra_capacity, refresh = dra_view(nodes, dra_config)
    kinds = {
        "extended": _cases(None, extended_capacity, config, Memos()),
        "dra": _cases(view, dra_capacity, dra_config, Memos()),
    }
    for cases in kinds.values():
        _check(cases)
    rows: list[dict[str, Any]] = []
    with one_core() as pinned:
        for case in kinds["extended"]:
            figures = {kind: measure(cases[case], iterations, warmup)
                       for kind, cases in kinds.items()}  # fmt: skip
            extended, dra = figures["extended"], figures["dra"]
            rows.append({
                "case": case, "nodes": nodes,
                "extended_median_us": round(extended["median_us"], 1),
                "dra_median_us": round(dra["median_us"], 1),
                "ratio": round(dra["median_us"] / extended["median_us"], 2),
                "extended_cpu_median_us": round(extended["cpu_median_us"], 1),
                "dra_cpu_median_us": round(dra["cpu_median_us"], 1),
                "dra_p99_us": round(dra["p99_us"], 1),
                "target_ratio": TARGET_RATIO,
                "extended_build_s": round(extended_build, 2),
                "dra_all_nodes_s": round(refresh, 2),
                "iterations": iterations, "pinned": pinned,
            })  # fmt: skip
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| case | nodes | extended median µs | DRA median µs | DRA / extended "
        "| CPU median µs (ext / DRA) | DRA p99 µs |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row['case']} | {row['nodes']:,} | {row['extended_median_us']:.1f} "
            f"| {row['dra_median_us']:.1f} | {row['ratio']:.2f}x "
            f"| {row['extended_cpu_median_us']:.1f} / {row['dra_cpu_median_us']:.1f} "
            f"| {row['dra_p99_us']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dra", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1,000 nodes, fewer iterations")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(markdown(rows))
    print(
        f"\n`python -m bench.dra{' --quick' if args.quick else ''}`, {rows[0]['pinned']}, "
        f"load average {load:.1f} on {os.cpu_count()} CPUs; every Node passed on with its "
        f"devices in {rows[0]['dra_all_nodes_s']:.2f} s (the extended-resource capacity "
        f"built in {rows[0]['extended_build_s']:.2f} s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
