"""The admission server's own series: decisions by verdict and reason."""

from __future__ import annotations

from gangkeeper.webhook.server.metrics import Metrics


def test_decisions_are_counted_by_verdict_and_reason_or_outcome() -> None:
    metrics = Metrics()
    metrics.observe_admission("validate", "denied", "rejected", 0.001, "gang-too-big")
    metrics.observe_admission("validate", "denied", "rejected", 0.001, "gang-too-big")
    metrics.observe_admission("mutate", "allowed", "patched", 0.002)
    text = metrics.render()
    assert "# TYPE gangkeeper_admission_decisions_total counter" in text
    assert (
        'gangkeeper_admission_decisions_total{endpoint="validate",verdict="denied",'
        'reason="gang-too-big"} 2'
    ) in text
    assert (
        'gangkeeper_admission_decisions_total{endpoint="mutate",verdict="allowed",'
        'reason="patched"} 1'
    ) in text
