"""Pure parts of the create-latency and memory benchmarks."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.create_latency import NOOP_LABEL, latency_rows, noop_pair, training_pod
from bench.memory import memory_pod, memory_rows, read_status_kb

STATUS = "Name:\tpython3\nVmPeak:\t  300000 kB\nVmHWM:\t  210000 kB\nVmRSS:\t  150000 kB\n"


def test_added_latency_is_the_difference_of_the_percentiles() -> None:
    plain = [float(i) for i in range(1, 101)]  # p50 50, p99 99
    gang = [v + 3.0 for v in plain]
    added = latency_rows(plain, gang)[2]
    assert added["p50_ms"] == 3.0
    assert added["p99_ms"] == 3.0
    assert added["met"] is True


def test_a_slow_tail_misses_the_p99_target() -> None:
    plain = [2.0] * 100
    gang = [3.0] * 98 + [40.0] * 2
    added = latency_rows(plain, gang)[2]
    assert added["p50_ms"] == 1.0
    assert added["p99_ms"] == 38.0
    assert added["met"] is False


def test_what_gangkeeper_adds_over_the_no_op_pair_is_its_own_share() -> None:
    plain = [2.0] * 100
    noop = [9.0] * 100  # the round trip any webhook pair pays
    gang = [11.5] * 100
    rows = latency_rows(plain, gang, noop)
    assert [r["namespace"] for r in rows] == [
        "not opted in (baseline)", "no-op webhook pair (floor)", "opted in (gangkeeper)",
        "added by gangkeeper", "added by gangkeeper over the no-op pair",
    ]
    assert rows[3]["p50_ms"] == 9.5
    assert rows[4]["p50_ms"] == 2.5 and rows[4]["p99_ms"] == 2.5


def test_the_no_op_pair_is_gangkeepers_configuration_sent_to_noop_for_its_namespace() -> None:
    mine = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "gangkeeper-mutating", "resourceVersion": "7", "uid": "u"},
        "webhooks": [
            {"name": "pods.mutate.gangkeeper.io",
             "clientConfig": {"url": "https://127.0.0.1:8443/mutate", "caBundle": "Q0E="},
             "namespaceSelector": {"matchLabels": {"gangkeeper.io/enabled": "true"}},
             "matchConditions": [{"name": "gpu", "expression": "true"}],
             "rules": [{"operations": ["CREATE"], "resources": ["pods"]}],
             "failurePolicy": "Fail", "timeoutSeconds": 5},
            {"name": "workloads.mutate.gangkeeper.io",
             "clientConfig": {"service": {"name": "gangkeeper", "namespace": "gk",
                                          "path": "/mutate", "port": 443}}},
        ],
    }
    twin = noop_pair(mine)
    assert twin["metadata"] == {"name": "gangkeeper-mutating-noop"}
    first, second = twin["webhooks"]
    assert first["name"] == "noop.pods.mutate.gangkeeper.io"
    assert first["clientConfig"] == {"url": "https://127.0.0.1:8443/noop", "caBundle": "Q0E="}
    assert first["namespaceSelector"] == {"matchLabels": {NOOP_LABEL: "true"}}
    # What the API server pays for is the same as for gangkeeper's own webhook.
    for key in ("matchConditions", "rules", "failurePolicy", "timeoutSeconds"):
        assert first[key] == mine["webhooks"][0][key]  # type: ignore[index]
    assert second["clientConfig"]["service"]["path"] == "/noop"
    assert mine["webhooks"][0]["clientConfig"]["url"].endswith("/mutate")  # type: ignore[index]


def test_latency_needs_both_samples() -> None:
    with pytest.raises(ValueError, match="both"):
        latency_rows([], [1.0])


def test_latency_pods_form_gangs_of_eight_with_gpu_requests() -> None:
    pods = [training_pod(i) for i in range(16)]
    gangs = Counter(p["metadata"]["annotations"]["gangkeeper.io/gang-name"] for p in pods)
    assert sorted(gangs.values()) == [8, 8]
    assert all(
        p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1" for p in pods
    )


@pytest.mark.parametrize(("field", "kb"), [("VmRSS", 150000), ("VmHWM", 210000)])
def test_proc_status_fields_are_read_in_kb(field: str, kb: int) -> None:
    assert read_status_kb(STATUS, field) == kb


@pytest.mark.parametrize(
    ("status", "field", "message"),
    [(STATUS, "VmSwap", "no field VmSwap"), ("VmRSS:\t12 MB\n", "VmRSS", "VmRSS")],
)
def test_a_missing_or_odd_status_field_is_an_error_naming_it(
    status: str, field: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        read_status_kb(status, field)


def test_memory_rows_compare_with_the_fresh_process() -> None:
    base, full = memory_rows(nodes=10, pods=1000, baseline_mb=50.0, rss_mb=350.0,
                             peak_mb=400.0, sync_s=2.0)  # fmt: skip
    assert base["rss_mb"] == 50.0
    assert full["vs_baseline"] == 7.0
    assert full["added_mb"] == 300.0
    assert full["kb_per_pod"] == 300.0


@pytest.mark.parametrize(
    ("pods", "rss_mb", "met"),
    [(50000, 299.0, True), (50000, 301.0, False), (5000, 120.0, None), (5000, 400.0, None)],
)
def test_the_300_mb_target_is_judged_only_at_its_size(
    pods: int, rss_mb: float, met: bool | None
) -> None:
    row = memory_rows(nodes=10, pods=pods, baseline_mb=50.0, rss_mb=rss_mb, peak_mb=rss_mb,
                      sync_s=1.0)[1]  # fmt: skip
    assert row["met"] is met


def test_memory_pods_fill_each_node_with_exactly_its_eight_gpus() -> None:
    nodes = 5
    gpu_per_node: Counter[str] = Counter()
    for i in range(nodes * 10):
        pod = memory_pod(i, nodes)
        gpus = pod["spec"]["containers"][0]["resources"]["requests"].get("nvidia.com/gpu")
        gpu_per_node[pod["spec"]["nodeName"]] += int(gpus or 0)
    assert dict(gpu_per_node) == {f"bench-memory-{n:05d}": 8 for n in range(nodes)}
