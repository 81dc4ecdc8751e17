"""`gangkeeper status` as a pure function of pods and nodes, and its two renderings."""

from __future__ import annotations

import json

from builders.gangs import T0, members, node, pod

from gangkeeper.policies.release.status import gang_status, render_json, render_text
from gangkeeper.policies.settings.config import Config, load_config


def cluster() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    pods = [
        pod("busy", 3, namespace="other", gates=(), node_name="gpu-a"),
        *members("llama", 8, namespace="ml", created=T0),
        *members("bert", 8, namespace="ml", created=T0 + 5)[:3],
        *members("done", 2, namespace="ops", gates=(), node_name="gpu-b", created=T0 + 9),
    ]
    return pods, [node("gpu-a", 4), node("gpu-b", 4)]


def test_status_lists_every_gang_oldest_first_with_counts_and_reasons() -> None:
    pods, nodes = cluster()
    rows = [r.as_dict() for r in gang_status(pods, nodes, Config(), T0 + 30)]
    assert [(r["namespace"], r["gang"]) for r in rows] == [
        ("ml", "llama"), ("ml", "bert"), ("ops", "done")
    ]
    llama, bert, done = rows
    assert (llama["present"], llama["minMember"], llama["gated"], llama["bound"]) == (8, 8, 8, 0)
    # 8 GPUs, 3 used by `busy`, 2 by `done`.
    assert llama["reason"] == "needs 8 nvidia.com/gpu, 3 free on eligible nodes"
    assert (bert["state"], bert["code"], bert["reason"]) == (
        "waiting", "incomplete", "3 of 8 members exist"
    )
    assert (done["state"], done["bound"], done["gated"]) == ("released", 2, 0)


def test_status_filters_by_namespace_but_counts_gpus_used_everywhere() -> None:
    pods, nodes = cluster()
    rows = gang_status(pods, nodes, Config(), T0 + 30, namespace="ml")
    assert {r.namespace for r in rows} == {"ml"}
    assert rows[0].reason.endswith("3 free on eligible nodes")


def test_status_marks_gangs_waiting_past_the_configured_timeout_as_stuck() -> None:
    pods, nodes = cluster()
    config = load_config({"gangTimeoutSeconds": 20})
    rows = {r.name: r for r in gang_status(pods, nodes, config, T0 + 30)}
    assert rows["llama"].stuck and not rows["done"].stuck
    assert "stuck" in render_text(list(rows.values())).splitlines()[1].split()


def test_text_output_is_a_table_with_members_present_over_needed() -> None:
    pods, nodes = cluster()
    text = render_text(gang_status(pods, nodes, Config(), T0 + 30))
    header, *lines = text.splitlines()
    assert header.split() == [
        "NAMESPACE", "GANG", "BACKEND", "MEMBERS", "GATED", "BOUND", "STATE", "QUEUE", "AGE",
        "WHY",
    ]
    bert = next(line for line in lines if " bert " in line)
    assert bert.split()[:9] == ["ml", "bert", "gate", "3/8", "3", "0", "waiting", "-", "25s"]
    assert bert.endswith("3 of 8 members exist")
    # llama waits for room, alone: first of one.
    llama = next(line for line in lines if " llama " in line)
    assert llama.split()[7] == "1/1"


def test_json_output_is_one_record_per_gang() -> None:
    pods, nodes = cluster()
    records = json.loads(render_json(gang_status(pods, nodes, Config(), T0 + 30)))
    assert [r["gang"] for r in records] == ["llama", "bert", "done"]
    assert set(records[0]) >= {
        "namespace", "gang", "minMember", "present", "gated", "bound", "state", "reason", "stuck"
    }


def test_no_gangs_says_so() -> None:
    assert render_text([]) == "No gangs found.\n"
    assert json.loads(render_json([])) == []
