"""A small cluster for the `gangkeeper view` tests: gangs in every state the pages
show, as plain Pod and Node dicts (`queue_cluster`), and how to bind a gang in it.

Nodes a and b carry pool=x (4 GPUs each), c pool=y (4). In queue order:
- `urgent` (priority 100, newest): 8 x 1 GPU on pool x; 3 free there: waits, holds a, b;
- `first`: 8 on pool x, older: waits behind urgent;
- `second`: 2 on pool x: would fit, but a and b are held: waits behind both;
- `third`: 6 on pool y (4 GPUs there): can never fit, holds nothing, alone in its queue;
- `done`: released, both members bound to b, not Ready;
- `partial`: released, one member bound to c, one not yet;
- `few`: 1 of 4 members exist (waits for members, not room);
- `busy`, not a gang member: 3 GPUs on a.
"""

from __future__ import annotations

from typing import Any

from builders.gangs import T0, members, node, pod

X, Y = {"pool": "x"}, {"pool": "y"}


def queue_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    urgent = members("urgent", 8, created=T0 + 30, selector=X)
    for raw in urgent:
        raw["spec"]["priority"] = 100
    partial = members("partial", 2, gates=(), created=T0 + 3, selector=Y)
    partial[0]["spec"]["nodeName"] = "c"
    pods = [
        pod("busy", 3, namespace="other", gates=(), node_name="a"),
        *members("first", 8, created=T0, selector=X),
        *members("second", 2, created=T0 + 10, selector=X),
        *members("third", 6, created=T0 + 20, selector=Y, namespace="lab"),
        *members("done", 2, gates=(), node_name="b", created=T0 + 1, selector=X),
        *partial,
        *members("few", 4, created=T0 + 5)[:1],
        *urgent,
    ]
    nodes = [node("a", 4, labels=X), node("b", 4, labels=X), node("c", 4, labels=Y)]
    return pods, nodes


def bind(pods: list[dict[str, Any]], gang: str, node_name: str) -> None:
    """Lift the gates of `gang`'s members and bind them to `node_name` (Running, Ready)."""
    for raw in pods:
        if raw["metadata"]["labels"].get("gangkeeper.io/gang") == gang:
            raw["spec"].pop("schedulingGates", None)
            raw["spec"]["nodeName"] = node_name
            raw["status"] = {"phase": "Running",
                             "conditions": [{"type": "Ready", "status": "True"}]}
