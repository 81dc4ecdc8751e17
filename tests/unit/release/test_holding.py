"""The holding rule as docs/controller.md ("Order") and `policies/release/plan.py` state
it: every complete waiting gang that could fit the empty cluster holds the nodes it may
use, not only the first one, so a later gang starts only on nodes no earlier waiting
gang may use."""

from __future__ import annotations

from builders.gangs import T0, members, node, pod

from gangkeeper.policies.cluster.observed_gangs import is_live, pod_info
from gangkeeper.policies.release.plan import plan
from gangkeeper.policies.settings.config import Config


def test_a_second_waiting_gang_holds_its_nodes_too() -> None:
    nodes = [
        node("a100-0", 4, labels={"pool": "a100"}),
        node("a100-1", 4, labels={"pool": "a100"}),
        node("l4-0", 4, labels={"pool": "l4"}),
    ]
    busy = [
        pod("busy-a", 3, gates=(), node_name="a100-0"),
        pod("busy-l", 1, gates=(), node_name="l4-0"),
    ]
    head = members("head", 8, created=T0, selector={"pool": "a100"})  # 5 free there
    mid = members("mid", 4, created=T0 + 10, selector={"pool": "l4"})  # 3 free there
    small = members("small", 2, created=T0 + 20, selector={"pool": "l4"})  # would fit l4-0
    cfg = Config()
    pods = [*busy, *head, *mid, *small]
    result = plan([pod_info(p, cfg) for p in pods if is_live(p)], nodes, cfg, T0 + 60)
    assert result.releases == ()
    reports = {r.label: r for r in result.reports}
    assert reports["head"].code == reports["mid"].code == "no-fit"
    assert reports["small"].code == "held"
    assert "team/mid" in reports["small"].reason
