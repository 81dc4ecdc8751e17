"""The pages of `gangkeeper view` as HTML strings, and the JSON the queue page polls.

Every value that comes from the cluster (names, reasons, Events) goes through `_e`
(html.escape) before it reaches the page; the script fills cells with textContent
only. Every text a page shows is formatted once here (`queue_cells`, `gang_facts`,
`member_cells`, `event_cells`, `cell_look`, ...), for the first HTML and for the JSON
the pages poll (`live` builds the gang's and the fleet's) alike, so a page reads the
same before and after a refresh.

Pure: a `ViewState` in, strings and dicts out. No I/O, no HTTP.
"""

from __future__ import annotations

import html
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from gangkeeper.policies.release.status import age

from .state import (
    STATES,
    Cell,
    FleetView,
    GangKey,
    Member,
    NodeRow,
    QueueRow,
    ShapeRow,
    ViewState,
    explain_text,
)

#: Colour classes gangs are spread over (view.css g0..g11); the symbol beside the
#: colour tells gangs apart without it.
PALETTE = 12


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def link(path: str, token: str, **params: str) -> str:
    """A URL on the view's own server, with its token (escape it for an attribute)."""
    query = urlencode({"token": token, **{k: v for k, v in params.items() if v}})
    return f"{path}?{query}"


def gang_path(key: GangKey) -> str:
    return f"/gang/{quote(key[0], safe='')}/{quote(key[1], safe='')}"


def clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(epoch))


def queue_cells(row: QueueRow) -> dict[str, str]:
    """The queue table's cells of one gang, as text."""
    needed = "?" if row.needed is None else str(row.needed)
    ahead = ", ".join(row.ahead) or "none"
    if row.ahead_count > len(row.ahead):
        ahead += f" and {row.ahead_count - len(row.ahead)} more"
    return {
        "position": f"{row.position} of {row.queue_length}" if row.position else "—",
        "gang": f"{row.namespace}/{row.name}",
        "state": row.state + (f" ({row.code})" if row.code else ""),
        "flags": "; ".join(row.flags),
        "members": f"{row.present}/{needed} (gated {row.gated}, bound {row.bound}, "
        f"Ready {row.ready})",
        "priority": str(row.priority),
        "age": age(row.age_seconds),
        "reason": row.reason,
        "ahead": ahead if row.position else "—",
    }


#: The queue's columns: (key in `queue_cells`, header).
COLUMNS = (
    ("position", "Position"), ("gang", "Gang"), ("state", "State"), ("members", "Members"),
    ("priority", "Priority"), ("age", "Age"), ("reason", "Why"), ("ahead", "Ahead of it"),
)


def state_json(state: ViewState | None, token: str, namespace: str = "", which: str = "all",
               error: str = "") -> dict[str, Any]:
    """What `/api/state` answers: the filtered queue (rows with their cells) and the
    fleet's totals; `error` says why the last read of the cluster failed."""
    if state is None:
        return {"generated": None, "rows": [], "fleet": {}, "error": error, "notes": []}
    rows = [
        {**r.as_dict(), "cells": queue_cells(r), "href": link(gang_path(r.key), token)}
        for r in state.rows_where(namespace, which)
    ]
    return {
        **snapshot_json(state, error),
        "rows": rows,
        "fleet": {"nodes": len({n.name for n in state.fleet.nodes}), **state.fleet.totals()},
    }


def snapshot_json(state: ViewState, error: str) -> dict[str, Any]:
    """What every JSON answer says about the snapshot it comes from."""
    return {"generated": state.generated, "updated": clock(state.generated), "error": error,
            "notes": list(state.notes)}


# --- layout -------------------------------------------------------------------------


def _layout(title: str, body: str, token: str, *, updated: str, error: str,
            refresh_ms: int, page: str, api: str, notes: Sequence[str] = ()) -> str:
    banner = (
        f'<p class="error" role="alert">Cannot read the cluster: {_e(error)} '
        "(showing the last snapshot).</p>" if error else ""
    )
    # What this kubeconfig may not read, on every page: a gang missing from the queue
    # must not look like no gang at all.
    said = "".join(f"<li>{_e(n)}</li>" for n in notes)
    banner += f'<ul id="notes" class="error" role="status"{"" if notes else " hidden"}>' \
        f"{said}</ul>"
    nav = " ".join(
        f'<a href="{_e(link(path, token))}">{name}</a>'
        for path, name in (("/", "Queue"), ("/fleet", "Fleet"))
    )
    # The script polls `api` and redraws the parts of `page` it names (assets/view.js).
    data = f' data-page="{page}" data-api="{_e(api)}"'
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)} · gangkeeper view</title>
<link rel="stylesheet" href="{_e(link('/assets/view.css', token))}">
<script src="{_e(link('/assets/view.js', token))}" defer></script>
</head>
<body data-refresh="{refresh_ms}"{data}>
<a class="skip" href="#main">Skip to content</a>
<header><strong>gangkeeper view</strong> <nav aria-label="Pages">{nav}</nav>
<span id="updated" aria-live="polite">Updated {_e(updated)}</span></header>
{banner}
<main id="main" tabindex="-1">
<h1>{_e(title)}</h1>
{body}
</main>
</body>
</html>
"""


def _options(values: Sequence[str], chosen: str, all_label: str) -> str:
    out = [f'<option value=""{" selected" if not chosen else ""}>{_e(all_label)}</option>']
    out += [
        f'<option value="{_e(v)}"{" selected" if v == chosen else ""}>{_e(v)}</option>'
        for v in values
    ]
    return "".join(out)


# --- queue --------------------------------------------------------------------------


def queue_page(state: ViewState, token: str, *, namespace: str = "", which: str = "all",
               error: str = "", refresh_ms: int = 5000) -> str:
    rows = state.rows_where(namespace, which)
    namespaces = sorted({r.namespace for r in state.rows})
    states = [s for s in STATES if s != "all"]
    form = f"""<form method="get" action="/" class="filters">
<input type="hidden" name="token" value="{_e(token)}">
<label for="namespace">Namespace</label>
<select id="namespace" name="namespace">{_options(namespaces, namespace, "all")}</select>
<label for="state">State</label>
<select id="state" name="state">{_options(states, "" if which == "all" else which, "all")}</select>
<button type="submit">Filter</button>
</form>"""
    head = "".join(f'<th scope="col">{name}</th>' for _, name in COLUMNS)
    body = "".join(_queue_row(r, token) for r in rows)
    empty = "" if rows else '<p id="empty">No gangs match.</p>'
    api = link("/api/state", token, namespace=namespace, state="" if which == "all" else which)
    where = f" in {namespace}" if namespace else ""
    content = f"""{form}
<p class="note">Position: the gang's place among the gangs waiting for room on nodes it
may use too (gangs waiting with code no-fit or held whose eligible nodes overlap), by
priority, then age. Rows marked <strong class="flag">!</strong> are partly bound, not
Ready, or stuck.</p>
<table id="queue">
<caption data-suffix="{_e(where)}">{len(rows)} gangs{_e(where)}</caption>
<thead><tr>{head}</tr></thead>
<tbody>{body}</tbody>
</table>
{empty}"""
    return _layout("Gang queue", content, token, updated=clock(state.generated), error=error,
                   refresh_ms=refresh_ms, page="queue", api=api, notes=state.notes)


def _queue_row(row: QueueRow, token: str) -> str:
    cells = queue_cells(row)
    out = []
    for key, _ in COLUMNS:
        text = _e(cells[key])
        if key == "gang":
            href = _e(link(gang_path(row.key), token))
            out.append(f'<th scope="row"><a href="{href}">{text}</a></th>')
        elif key == "state":
            flags = f' <strong class="flag">! {_e(cells["flags"])}</strong>' if row.flags else ""
            out.append(f'<td data-col="state">{text}{flags}</td>')
        else:
            out.append(f'<td data-col="{key}">{text}</td>')
    cls = ' class="flagged"' if row.flags else ""
    return f'<tr{cls} data-gang="{_e(cells["gang"])}">{"".join(out)}</tr>\n'


# --- gang ---------------------------------------------------------------------------


def gang_page(state: ViewState, key: GangKey, token: str, *, context: str = "",
              error: str = "", refresh_ms: int = 5000) -> str | None:
    """The gang's page; None when the snapshot has no such gang."""
    detail = state.details.get(key)
    if detail is None:
        return None
    row = detail.row
    summary = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in gang_facts(row))
    ctx = f" --context {context}" if context else ""
    if detail.owner is not None:
        owner = detail.owner
        command = f"kubectl{ctx} -n {key[0]} describe {owner.resource}/{owner.name}"
        owner_html = f"<p>{_e(owner.kind)} <strong>{_e(owner.name)}</strong> " \
            f"({_e(owner.api_version)})</p>"
    else:
        command = f"kubectl{ctx} -n {key[0]} describe pod {detail.members[0].name}"
        owner_html = "<p>No owner: the gang is made of bare pods.</p>"
    explain = f"gangkeeper explain {detail.target} -n {key[0]}" + (
        f" --context {context}" if context else "")
    members = "".join(
        "<tr>" + "".join(
            f'<th scope="row">{_e(v)}</th>' if i == 0 else f"<td>{_e(v)}</td>"
            for i, v in enumerate(member_cells(m))
        ) + "</tr>"
        for m in detail.members
    )
    events = state.events_of(key)
    event_rows = "".join(
        "<tr>" + "".join(f"<td>{_e(v)}</td>" for v in event_cells(e)) + "</tr>"
        for e in events
    )
    if events:
        events_html = (
            f'<table><caption>{EVENTS_CAPTION}</caption><thead><tr>'
            + "".join(f'<th scope="col">{h}</th>' for h in EVENT_COLUMNS)
            + f"</tr></thead><tbody>{event_rows}</tbody></table>"
        )
    else:
        events_html = f"<p>{_e(no_events(state))}</p>"
    content = f"""<dl class="facts" id="facts">{summary}</dl>
<h2>Owner</h2>
{owner_html}
<pre class="command"><code id="command">{_e(command)}</code></pre>
<button type="button" class="copy" data-copy="command">Copy command</button>
<pre class="command"><code id="explain-command">{_e(explain)}</code></pre>
<button type="button" class="copy" data-copy="explain-command">Copy command</button>
<h2>Members</h2>
<table id="members"><caption>Members and their nodes</caption>
<thead><tr><th scope="col">Pod</th><th scope="col">Node</th><th scope="col">Status</th></tr>
</thead><tbody>{members}</tbody></table>
<h2>Events</h2>
<div id="events">{events_html}</div>
<h2>gangkeeper explain</h2>
<pre class="explain" id="explain">{_e(explain_text(state, key))}</pre>"""
    return _layout(f"Gang {key[0]}/{row.name}", content, token,
                   updated=clock(state.generated), error=error, refresh_ms=refresh_ms,
                   page="gang", api=link(f"/api{gang_path(key)}", token), notes=state.notes)


def gang_facts(row: QueueRow) -> list[tuple[str, str]]:
    """The gang page's summary: (term, text) pairs."""
    cells = queue_cells(row)
    return [
        ("State", cells["state"] + (f" — {cells['flags']}" if row.flags else "")),
        ("Why", row.reason), ("Position", cells["position"]), ("Ahead of it", cells["ahead"]),
        ("Members", cells["members"]), ("Age", cells["age"]),
    ]


def member_cells(member: Member) -> tuple[str, str, str]:
    """A row of the gang page's members table: pod, node ("—" when none), status."""
    return (member.name, member.node or "—", member.status)


EVENTS_CAPTION = "Events about its pods and owner"
EVENT_COLUMNS = ("Type", "Reason", "Object", "Message")


def no_events(state: ViewState) -> str:
    """What the gang page says when it has no Events (and why, when they were not read)."""
    return f"No Events{f': {state.events_note}' if state.events_note else ''}."


def event_cells(event: Mapping[str, Any]) -> tuple[str, str, str, str]:
    regarding = event.get("regarding") or {}
    return (
        str(event.get("type", "")), str(event.get("reason", "")),
        f"{regarding.get('kind', '')}/{regarding.get('name', '')}",
        str(event.get("note") or event.get("message") or ""),
    )


# --- fleet --------------------------------------------------------------------------

_KIND_TEXT = {
    "other": ("o", "used by another pod"),
    "placeholder": ("P", "placeholder (room reserved for a waiting gang)"),
    "held": ("H", "free, held for a waiting gang"),
    "free": (".", "free"),
}


def _colour(who: str) -> str:
    return f"g{zlib.crc32(who.encode()) % PALETTE}"


def fleet_page(state: ViewState, token: str, *, error: str = "",
               refresh_ms: int = 5000) -> str:
    fleet = state.fleet
    symbols, legend = fleet_legend(fleet)
    legend_rows = "".join(
        f"<tr><td>{_span(look)}</td><td>{_e(meaning)}</td></tr>" for look, meaning in legend
    )
    legend_html = (
        '<table class="legend" id="legend"><caption>Legend</caption><thead><tr>'
        '<th scope="col">Cell</th><th scope="col">Meaning</th></tr></thead>'
        f"<tbody>{legend_rows}</tbody></table>"
    )
    summary = f'<p id="fleet-summary">{_e(fleet_summary(fleet))}</p>'
    grid = _shape_table(fleet) if fleet.aggregated else _node_tables(fleet, symbols)
    return _layout("Fleet", summary + legend_html + f'<div id="fleet">{grid}</div>', token,
                   updated=clock(state.generated), error=error, refresh_ms=refresh_ms,
                   page="fleet", api=link("/api/fleet", token), notes=state.notes)


def fleet_summary(fleet: FleetView) -> str:
    totals = fleet.totals()
    return (
        f"{len({n.name for n in fleet.nodes})} GPU nodes, {sum(totals.values())} GPUs: "
        f"{totals['gang']} held by gangs, {totals['other']} by other pods, "
        f"{totals['placeholder']} by placeholders, {totals['held']} free but held for "
        f"waiting gangs, {totals['free']} free."
    )


Look = dict[str, str]


def fleet_legend(fleet: FleetView) -> tuple[dict[str, str], list[tuple[Look, str]]]:
    """Each gang's symbol on the picture (its number), and the legend's rows: how a
    cell looks (`cell_look`'s keys) and what it means."""
    gangs = sorted({c.who for n in fleet.nodes for c in n.cells if c.kind == "gang"})
    symbols = {who: str(i + 1) for i, who in enumerate(gangs)}
    rows: list[tuple[Look, str]] = [
        ({"class": f"cell k-gang {_colour(w)}", "text": symbols[w]}, f"held by gang {w}")
        for w in gangs
    ]
    rows.append(({"class": "cell k-free coming", "text": "·"},
                 "dashed border: taken by a pod not bound yet (where the plan places it)"))
    rows += [({"class": f"cell k-{k}", "text": sym}, text) for k, (sym, text) in
             _KIND_TEXT.items()]
    return symbols, rows


def _span(look: Look) -> str:
    title = f' title="{_e(look["title"])}"' if look.get("title") else ""
    return f'<span class="{_e(look["class"])}"{title}>{_e(look["text"])}</span>'


def node_marks(node: NodeRow) -> list[Look]:
    """The words beside a node's name: cordoned, tainted (its taints as the title),
    NotReady."""
    marks = ([{"text": "cordoned"}] if node.cordoned else []) + (
        [{"text": "tainted", "title": "; ".join(node.taints)}] if node.taints else []) + (
        [] if node.ready else [{"text": "NotReady"}])
    return [{"class": "mark", **m} for m in marks]


def fleet_groups(fleet: FleetView) -> list[tuple[str, list[NodeRow]]]:
    """The node rows in a table per topology domain: (caption, rows)."""
    by_domain: dict[str, list[NodeRow]] = {}
    for node in fleet.nodes:
        by_domain.setdefault(node.domain, []).append(node)
    key = fleet.topology_key
    return [
        (f"{key}={domain}" if key and domain else "Nodes" if not key else f"no {key} label",
         rows)
        for domain, rows in sorted(by_domain.items())
    ]


#: The per-node tables' columns.
NODE_COLUMNS = ("Node", "Resource", "GPUs")


def _node_tables(fleet: FleetView, symbols: Mapping[str, str]) -> str:
    out = []
    head = "".join(f'<th scope="col">{h}</th>' for h in NODE_COLUMNS)
    for caption, nodes in fleet_groups(fleet):
        rows = "".join(
            f'<tr><th scope="row">{_e(node.name)}'
            + "".join(f" {_span(m)}" for m in node_marks(node))
            + f"</th><td>{_e(node.resource)}</td><td class=\"cells\">"
            + "".join(_span(cell_look(c, symbols)) for c in node.cells) + "</td></tr>"
            for node in nodes
        )
        out.append(f'<table class="fleet"><caption>{_e(caption)}</caption><thead><tr>{head}'
                   f"</tr></thead><tbody>{rows}</tbody></table>")
    return "".join(out) or "<p>No GPU nodes.</p>"


def cell_look(cell: Cell, symbols: Mapping[str, str]) -> Look:
    """One GPU cell of the picture: its classes, tooltip and symbol."""
    coming = " coming" if cell.coming else ""
    later = " (not bound yet)" if cell.coming else ""
    if cell.kind == "gang":
        return {"class": f"cell k-gang {_colour(cell.who)}{coming}",
                "title": f"gang {cell.who}{later}", "text": symbols[cell.who]}
    sym, text = _KIND_TEXT[cell.kind]
    return {"class": f"cell k-{cell.kind}{coming}",
            "title": (f"{text}: {cell.who}" if cell.who else text) + later, "text": sym}


#: The kinds of cells, in the shape table's and the bars' order.
KINDS = ("gang", "other", "placeholder", "held", "free")


def shape_columns(fleet: FleetView) -> tuple[str, ...]:
    return ("Shape", fleet.topology_key or "Domain", "Nodes", "GPUs", "Gangs", "Other pods",
            "Placeholders", "Held", "Free", "Cordoned", "Tainted", "Use")


def shape_cells(shape: ShapeRow) -> list[str]:
    """A row of the shape table as text, but for its bar (the last column)."""
    return [shape.shape, shape.domain or "—", str(shape.nodes), str(shape.gpus),
            *(str(shape.counts.get(k, 0)) for k in KINDS), str(shape.cordoned),
            str(shape.tainted)]


def _shape_table(fleet: FleetView) -> str:
    rows = []
    for shape in fleet.shapes:
        first, *rest = shape_cells(shape)
        rows.append(
            f'<tr><th scope="row">{_e(first)}</th>'
            + "".join(f"<td>{_e(v)}</td>" for v in rest)
            + f'<td class="bars">{_svg_bar(shape.counts, shape.gpus)}</td></tr>'
        )
    head = "".join(f'<th scope="col">{_e(h)}</th>' for h in shape_columns(fleet))
    return (
        '<p class="note">More nodes than the picture shows well: one row per node shape '
        "(and topology domain), GPUs summed.</p>"
        f'<table class="shapes"><caption>Node shapes</caption><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _svg_bar(counts: Mapping[str, int], total: int) -> str:
    """A stacked bar (inline SVG) of the kinds; the numbers stand in the row beside it."""
    if not total:
        return ""
    x, parts = 0.0, []
    for kind in KINDS:
        width = 200 * counts.get(kind, 0) / total
        if width:
            parts.append(f'<rect class="k-{kind}" x="{x:.1f}" y="0" width="{width:.1f}" '
                         f'height="12"><title>{kind}: {counts.get(kind, 0)}</title></rect>')
            x += width
    return (f'<svg width="200" height="12" role="img" aria-label="GPU use">'
            f"{''.join(parts)}</svg>")
