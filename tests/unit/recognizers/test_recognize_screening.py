"""Pod screening is a capability a recogniser declares (`may_claim`); the registry asks it."""

from __future__ import annotations

from dataclasses import dataclass, field

from gangkeeper.policies.model import Gang, KubeObject, OwnerLookup, PodMembership
from gangkeeper.policies.recognizers.base import PodSignals, Registry, ResourceRule
from gangkeeper.policies.recognizers.registry import default_registry, recognize_pod
from gangkeeper.policies.settings.config import Config

POD: KubeObject = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "labels": {"team": "a"}},
    "spec": {"containers": [{"name": "c"}]},
}


@dataclass
class Counting:
    """A new kind: asked about pods only when its screen lets them through."""

    name: str
    claims: bool | None
    rules: tuple[ResourceRule, ...] = ()
    asked: list[str] = field(default_factory=list)
    seen: list[PodSignals] = field(default_factory=list)

    def recognize_object(
        self, obj: KubeObject, lookup: OwnerLookup, config: Config
    ) -> list[Gang] | None:
        return None

    def recognize_pod(
        self, pod: KubeObject, lookup: OwnerLookup, config: Config
    ) -> PodMembership | None:
        self.asked.append(self.name)
        return None


@dataclass
class Screening(Counting):
    def may_claim(self, signals: PodSignals) -> bool:
        self.seen.append(signals)
        return bool(self.claims)


def test_a_recogniser_whose_screen_rules_the_pod_out_is_not_asked() -> None:
    ruled_out, let_in = Screening("out", False), Screening("in", True)
    plain = Counting("plain", None)
    registry = Registry()
    for recognizer in (ruled_out, let_in, plain):
        registry.register(recognizer)
    assert recognize_pod(POD, lambda *_: None, Config(), registry) is None
    assert (ruled_out.asked, let_in.asked, plain.asked) == ([], ["in"], ["plain"])
    # One reading of the pod's signals serves every screen.
    assert ruled_out.seen == let_in.seen == [PodSignals(frozenset(), {"team": "a"})]


def test_the_shipped_workload_recognisers_screen_and_the_pod_level_ones_do_not() -> None:
    screens = {r.name for r, may_claim in default_registry().screened() if may_claim is not None}
    assert screens == {
        "trainjob", "jobset", "job",
        "pytorchjob", "tfjob", "mpijob", "xgboostjob", "paddlejob", "jaxjob",
        "raycluster", "rayjob", "rayservice",
    }
