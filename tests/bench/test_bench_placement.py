"""bench.placement's pure part: the random batches it draws."""

from __future__ import annotations

import random

from bench.placement import COMPETITORS, draw_batch, draw_job_batch, gang_job, pod


def test_batches_fit_the_fleet_and_mix_member_sizes() -> None:
    rng = random.Random(1)
    sizes: set[int] = set()
    for _ in range(50):
        batch = draw_batch(rng, 32)
        assert batch and sum(map(sum, batch)) <= 32
        assert all(len(members) >= 2 for members in batch)
        sizes.update(s for members in batch for s in members)
    assert sizes == {2, 4, 8}


def test_the_pods_are_annotated_gang_members_of_the_fleet() -> None:
    body = pod("g-0", "g", 3, 4, "place-pinned")
    assert body["metadata"]["annotations"] == {
        "gangkeeper.io/gang-name": "g", "gangkeeper.io/min-member": "3"}
    assert body["spec"]["nodeSelector"] == {"bench.gangkeeper.io/place-fleet": "place-pinned"}


def test_competed_batches_fit_beside_the_competitors_one_size_per_job() -> None:
    rng = random.Random(2)
    room = 32 - sum(COMPETITORS)
    for _ in range(50):
        batch = draw_job_batch(rng, room)
        assert batch and sum(map(sum, batch)) <= room
        assert all(len(members) >= 2 and len(set(members)) == 1 for members in batch)


def test_a_competed_gang_is_an_indexed_job_its_owner_recreates() -> None:
    job = gang_job("r0-g1", 3, 4, "place-pinned")
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    limits = spec["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "4"}
    assert "annotations" not in spec["template"]["metadata"]  # the Job is the gang
