"""The JSON the gang page and the fleet page poll to follow the cluster without a
reload: `/api/gang/NS/LABEL` (`gang_json`) and `/api/fleet` (`fleet_json`); the queue
page's `/api/state` is `pages.state_json`.

Each answer carries the texts the page shows, formatted by the same functions of
`pages` that made the first HTML (`gang_facts`, `member_cells`, `cell_look`, ...), so
the script (assets/view.js) only puts them in place, with textContent.

Pure: a `ViewState` in, dicts out. No I/O, no HTTP.
"""

from __future__ import annotations

from typing import Any

from . import pages
from .state import GangKey, ViewState, explain_text


def gang_json(state: ViewState, key: GangKey, error: str = "") -> dict[str, Any] | None:
    """What `/api/gang/NS/LABEL` answers; None when the snapshot has no such gang.

    Runs `explain` once per snapshot for the gang (kept with the snapshot), as the page
    does."""
    detail = state.details.get(key)
    if detail is None:
        return None
    row = detail.row
    events = state.events_of(key)
    return {
        **pages.snapshot_json(state, error),
        "gang": {
            **row.as_dict(),
            "cells": pages.queue_cells(row),
            "facts": [list(pair) for pair in pages.gang_facts(row)],
            "members": [
                {"pod": m.name, "node": m.node, "status": m.status, "ready": m.ready,
                 "cells": list(pages.member_cells(m))}
                for m in detail.members
            ],
            "events": {
                "caption": pages.EVENTS_CAPTION,
                "columns": list(pages.EVENT_COLUMNS),
                "rows": [list(pages.event_cells(e)) for e in events],
                "none": "" if events else pages.no_events(state),
            },
            "explain": explain_text(state, key),
        },
    }


def fleet_json(state: ViewState, error: str = "") -> dict[str, Any]:
    """What `/api/fleet` answers: the picture's summary and legend, and either a table
    per topology domain of nodes with their GPU cells or, above the page's node limit
    (`aggregated`), one row per node shape (the per-node cells are then left out:
    thousands of nodes, and the page does not draw them)."""
    fleet = state.fleet
    symbols, legend = pages.fleet_legend(fleet)
    groups = [] if fleet.aggregated else [
        {
            "caption": caption,
            "nodes": [
                {"name": n.name, "marks": pages.node_marks(n), "resource": n.resource,
                 "cells": [pages.cell_look(c, symbols) for c in n.cells]}
                for n in nodes
            ],
        }
        for caption, nodes in pages.fleet_groups(fleet)
    ]
    return {
        **pages.snapshot_json(state, error),
        "summary": pages.fleet_summary(fleet),
        "totals": fleet.totals(),
        "legend": [{"cell": look, "meaning": meaning} for look, meaning in legend],
        "aggregated": fleet.aggregated,
        "topologyKey": fleet.topology_key,
        "columns": list(pages.shape_columns(fleet) if fleet.aggregated else pages.NODE_COLUMNS),
        "groups": groups,
        "shapes": [
            {"cells": pages.shape_cells(s), "counts": {k: s.counts.get(k, 0)
                                                      for k in pages.KINDS},
             "gpus": s.gpus}
            for s in fleet.shapes
        ],
    }
