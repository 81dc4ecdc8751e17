"""The capacities a planner keeps between passes answer as ones built from scratch.

`KeptCapacity` moves only the nodes whose facts changed; whatever the sequence of
node adds, deletes, resizes, relabels, cordons and GPUs taken away, its two views must
give the bins a fresh `Capacity` of the same nodes gives, and a pass filling its fleet
copy must leave the kept ones as they were (a pass that leaked pods into the next
would release gangs into GPUs that are free).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangkeeper.policies import Config
from gangkeeper.policies.cluster.capacity import Capacity
from gangkeeper.policies.cluster.kept_capacity import KeptCapacity
from gangkeeper.policies.cluster.node_facts import NodeFacts, read_node
from gangkeeper.policies.cluster.node_shapes import Bin
from gangkeeper.policies.model import Placement
from gangkeeper.webhook.sandbox.nodes import gpu_node

CONFIG = Config()
PLACEMENTS = [Placement(), Placement(node_selector=(("pool", "a"),))]

#: (node index, GPUs or None for "deleted", pool label, cordoned)
states = st.lists(
    st.dictionaries(
        st.integers(0, 5),
        st.tuples(st.sampled_from([None, 0, 2, 8]), st.sampled_from(["a", "b"]), st.booleans()),
        max_size=6,
    ),
    min_size=1, max_size=6,
)


def node(index: int, gpus: int, pool: str, cordoned: bool) -> dict[str, Any]:
    raw = gpu_node(f"n{index}", gpus, labels={"pool": pool})
    if cordoned:
        raw["spec"] = {"unschedulable": True}
    return raw


def bins(capacity: Capacity, view: str) -> list[tuple[Any, ...]]:
    def key(b: Bin) -> tuple[Any, ...]:
        return (b.gpus, b.count, tuple(sorted(b.eligible)))

    return sorted(key(b) for b in capacity.bins(PLACEMENTS, view=view))


def fresh(facts: Sequence[NodeFacts], gpu_only: bool) -> Capacity:
    capacity = Capacity(CONFIG)
    for f in facts:
        if f.gpus or not gpu_only:
            capacity.upsert_facts(f)
    return capacity


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states)
def test_kept_capacities_answer_as_fresh_ones_after_every_change(
    sequence: list[dict[int, tuple[int | None, str, bool]]],
) -> None:
    kept = KeptCapacity(CONFIG)
    current: dict[int, NodeFacts] = {}
    for changes in sequence:
        for index, (gpus, pool, cordoned) in changes.items():
            if gpus is None:
                current.pop(index, None)
            else:
                # A changed Node is a new dict, so new facts (as the informer's store).
                current[index] = read_node(node(index, gpus, pool, cordoned), CONFIG)
        facts = list(current.values())
        kept.update(facts)
        every, gpu_fleet = fresh(facts, gpu_only=False), fresh(facts, gpu_only=True)
        assert bins(kept.every, "ever") == bins(every, "ever")
        assert bins(kept.every, "free") == bins(every, "free")
        copy = kept.fleet_copy()
        assert bins(copy, "free") == bins(gpu_fleet, "free")
        assert copy.node_count == gpu_fleet.node_count
        # The pass fills its copy; the next pass's copy starts empty again.
        copy.add_pods((f"p{f.name}", f.name, dict(f.gpus)) for f in facts if f.gpus)
        assert bins(kept.fleet_copy(), "free") == bins(gpu_fleet, "free")


def test_a_copy_shares_no_count_with_its_original() -> None:
    original = Capacity(CONFIG)
    for index in range(3):
        original.upsert_facts(read_node(node(index, 8, "a", False), CONFIG))
    original.add_pod("before", "n0", {"nvidia.com/gpu": 4})
    copy = original.copy()
    copy.add_pod("after", "n1", {"nvidia.com/gpu": 8})
    copy.delete_node("n2")
    copy.remove_pod("before")
    assert bins(original, "free") == [
        (((("nvidia.com/gpu", 4),)), 1, (0, 1)), ((("nvidia.com/gpu", 8),), 2, (0, 1)),
    ]
    assert original.node_count == 3
    assert bins(copy, "free") == [((("nvidia.com/gpu", 8),), 1, (0, 1))]
