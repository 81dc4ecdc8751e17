"""`gangkeeper explain` reads like `kubectl describe`: ages as kubectl prints them, one
column where every label's value starts, and free GPUs held for an older gang said to be
held, beside the "0 free" of the reason."""

from __future__ import annotations

import re

import pytest
from builders.gangs import T0, members, node, pod

from gangkeeper.policies.release.explain import Target, explain, render
from gangkeeper.policies.settings.config import Config

CONFIG = Config()
MINUTE, HOUR, DAY = 60, 3600, 86400


def held_explanation(age: float = 60) -> str:
    busy = pod("other", 6, node_name="n1")
    older = members("big", 2, gpus=8, created=T0)  # needs 16 of 10 free: holds n1, n2
    younger = members("small", 1, gpus=2, created=T0 + 10)
    expl = explain([busy, *older, *younger], [node("n1", 8), node("n2", 8)], CONFIG,
                   T0 + 10 + age, Target.parse("small-0", "team"))
    return render(expl, [])


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (59, "59s"), (119, "119s"), (5 * MINUTE + 12, "5m12s"), (7 * MINUTE, "7m"),
        (42 * MINUTE + 5, "42m"), (5 * HOUR + 30 * MINUTE, "5h30m"), (30 * HOUR, "30h"),
        (2 * DAY + 3 * HOUR, "2d3h"), (20 * DAY, "20d"),
    ],
)
def test_ages_read_as_kubectl_prints_them(seconds: int, shown: str) -> None:
    age = re.search(r"^Age:\s+(\S+)$", held_explanation(seconds), re.M)
    assert age is not None and age[1] == shown


def test_every_label_value_starts_in_one_column() -> None:
    text = held_explanation()
    # Section headers (Held for older gangs, Pods, Events) head a list, as in kubectl.
    sections = ("Held for older gangs:", "Pods:", "Events:")
    labelled = [line for line in text.splitlines()
                if re.match(r"^[A-Z][\w ]*:\s+\S", line) and not line.startswith(sections)]
    assert len(labelled) >= 8
    columns = {len(m[0]) for line in labelled if (m := re.match(r"^[^:]+:\s+", line))}
    assert len(columns) == 1, "\n".join(labelled)


def test_free_gpus_held_for_an_older_gang_are_said_to_be_held() -> None:
    text = held_explanation()
    assert "0 free" in text  # the reason: none free for this gang
    assert re.search(r"10 free on the 2 nodes its members may use\S*.* held for team/big", text)
