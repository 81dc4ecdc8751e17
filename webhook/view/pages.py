"""The pages of `gangkeeper view` as HTML strings, and the JSON the queue page polls.

Every value that comes from the cluster (names, reasons, Events) goes through `_e`
(html.escape) before it reaches the page; the script fills cells with textContent
only. The queue's cells are formatted once here (`queue_cells`), for the first HTML
and for the JSON alike, so the page reads the same before and after a refresh.

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

from .state import STATES, Cell, FleetView, GangKey, QueueRow, ViewState, explain_text

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


def _clock(epoch: float) -> str:
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
        "generated": state.generated,
        "updated": _clock(state.generated),
        "rows": rows,
        "fleet": {"nodes": len({n.name for n in state.fleet.nodes}), **state.fleet.totals()},
        "error": error,
        "notes": list(state.notes),
    }


# --- layout -------------------------------------------------------------------------


def _layout(title: str, body: str, token: str, *, updated: str, error: str,
            refresh_ms: int, api: str = "", notes: Sequence[str] = ()) -> str:
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
    data = f' data-api="{_e(api)}"' if api else ""
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
    return _layout("Gang queue", content, token, updated=_clock(state.generated), error=error,
                   refresh_ms=refresh_ms, api=api, notes=state.notes)


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
    row, cells = detail.row, queue_cells(detail.row)
    facts = [
        ("State", cells["state"] + (f" — {cells['flags']}" if row.flags else "")),
        ("Why", row.reason), ("Position", cells["position"]), ("Ahead of it", cells["ahead"]),
        ("Members", cells["members"]), ("Age", cells["age"]),
    ]
    summary = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts)
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
        f'<tr><th scope="row">{_e(m.name)}</th><td>{_e(m.node or "—")}</td>'
        f"<td>{_e(m.status)}</td></tr>"
        for m in detail.members
    )
    events = state.events_of(key)
    event_rows = "".join(
        "<tr>" + "".join(f"<td>{_e(v)}</td>" for v in _event_cells(e)) + "</tr>"
        for e in events
    )
    if events:
        events_html = (
            '<table><caption>Events about its pods and owner</caption><thead><tr>'
            + "".join(f'<th scope="col">{h}</th>' for h in ("Type", "Reason", "Object",
                                                             "Message"))
            + f"</tr></thead><tbody>{event_rows}</tbody></table>"
        )
    else:
        note = f": {state.events_note}" if state.events_note else ""
        events_html = f"<p>No Events{_e(note)}.</p>"
    content = f"""<dl class="facts">{summary}</dl>
<h2>Owner</h2>
{owner_html}
<pre class="command"><code id="command">{_e(command)}</code></pre>
<button type="button" class="copy" data-copy="command">Copy command</button>
<pre class="command"><code id="explain-command">{_e(explain)}</code></pre>
<button type="button" class="copy" data-copy="explain-command">Copy command</button>
<h2>Members</h2>
<table><caption>Members and their nodes</caption>
<thead><tr><th scope="col">Pod</th><th scope="col">Node</th><th scope="col">Status</th></tr>
</thead><tbody>{members}</tbody></table>
<h2>Events</h2>
{events_html}
<h2>gangkeeper explain</h2>
<pre class="explain">{_e(explain_text(state, key))}</pre>"""
    return _layout(f"Gang {key[0]}/{row.name}", content, token,
                   updated=_clock(state.generated), error=error, refresh_ms=refresh_ms,
                   notes=state.notes)


def _event_cells(event: Mapping[str, Any]) -> tuple[str, str, str, str]:
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
    gangs = sorted({c.who for n in fleet.nodes for c in n.cells if c.kind == "gang"})
    symbols = {who: str(i + 1) for i, who in enumerate(gangs)}
    legend_rows = [
        f'<tr><td><span class="cell k-gang {_colour(w)}">{symbols[w]}</span></td>'
        f"<td>held by gang {_e(w)}</td></tr>"
        for w in gangs
    ] + [
        '<tr><td><span class="cell k-free coming">·</span></td>'
        "<td>dashed border: taken by a pod not bound yet (where the plan places it)</td></tr>"
    ] + [
        f'<tr><td><span class="cell k-{k}">{_e(sym)}</span></td><td>{_e(text)}</td></tr>'
        for k, (sym, text) in _KIND_TEXT.items()
    ]
    legend = (
        '<table class="legend"><caption>Legend</caption><thead><tr><th scope="col">Cell</th>'
        f'<th scope="col">Meaning</th></tr></thead><tbody>{"".join(legend_rows)}</tbody></table>'
    )
    totals = fleet.totals()
    summary = (
        f"<p>{len({n.name for n in fleet.nodes})} GPU nodes, {sum(totals.values())} GPUs: "
        f"{totals['gang']} held by gangs, {totals['other']} by other pods, "
        f"{totals['placeholder']} by placeholders, {totals['held']} free but held for "
        f"waiting gangs, {totals['free']} free.</p>"
    )
    grid = _shape_table(fleet) if fleet.aggregated else _node_tables(fleet, symbols)
    return _layout("Fleet", summary + legend + grid, token, updated=_clock(state.generated),
                   error=error, refresh_ms=refresh_ms, notes=state.notes)


def _marks(cordoned: bool, taints: Sequence[str], ready: bool) -> str:
    marks = (["cordoned"] if cordoned else []) + (["tainted"] if taints else []) + (
        [] if ready else ["NotReady"])
    title = _e("; ".join(taints))
    return "".join(
        f' <span class="mark" title="{title}">{m}</span>' if m == "tainted" else
        f' <span class="mark">{m}</span>' for m in marks
    )


def _node_tables(fleet: FleetView, symbols: Mapping[str, str]) -> str:
    by_domain: dict[str, list[str]] = {}
    for node in fleet.nodes:
        cells = "".join(_cell_html(c, symbols) for c in node.cells)
        row = (
            f'<tr><th scope="row">{_e(node.name)}'
            f"{_marks(node.cordoned, node.taints, node.ready)}</th>"
            f"<td>{_e(node.resource)}</td><td class=\"cells\">{cells}</td></tr>"
        )
        by_domain.setdefault(node.domain, []).append(row)
    out = []
    for domain, rows in sorted(by_domain.items()):
        caption = (
            f"{_e(fleet.topology_key)}={_e(domain)}" if fleet.topology_key and domain
            else "Nodes" if not fleet.topology_key else f"no {_e(fleet.topology_key)} label"
        )
        out.append(
            f'<table class="fleet"><caption>{caption}</caption><thead><tr>'
            '<th scope="col">Node</th><th scope="col">Resource</th><th scope="col">GPUs</th>'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(out) or "<p>No GPU nodes.</p>"


def _cell_html(cell: Cell, symbols: Mapping[str, str]) -> str:
    coming = " coming" if cell.coming else ""
    later = " (not bound yet)" if cell.coming else ""
    if cell.kind == "gang":
        title = f"gang {cell.who}{later}"
        return (f'<span class="cell k-gang {_colour(cell.who)}{coming}" title="{_e(title)}">'
                f"{symbols[cell.who]}</span>")
    sym, text = _KIND_TEXT[cell.kind]
    title = (f"{text}: {cell.who}" if cell.who else text) + later
    return f'<span class="cell k-{cell.kind}{coming}" title="{_e(title)}">{_e(sym)}</span>'


def _shape_table(fleet: FleetView) -> str:
    kinds = ("gang", "other", "placeholder", "held", "free")
    rows = []
    for shape in fleet.shapes:
        counts = "".join(f"<td>{shape.counts.get(k, 0)}</td>" for k in kinds)
        rows.append(
            f'<tr><th scope="row">{_e(shape.shape)}</th><td>{_e(shape.domain or "—")}</td>'
            f"<td>{shape.nodes}</td><td>{shape.gpus}</td>{counts}"
            f"<td>{shape.cordoned}</td><td>{shape.tainted}</td>"
            f'<td class="bars">{_svg_bar(shape.counts, shape.gpus)}</td></tr>'
        )
    head = "".join(
        f'<th scope="col">{h}</th>' for h in (
            "Shape", fleet.topology_key or "Domain", "Nodes", "GPUs", "Gangs", "Other pods",
            "Placeholders", "Held", "Free", "Cordoned", "Tainted", "Use")
    )
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
    for kind in ("gang", "other", "placeholder", "held", "free"):
        width = 200 * counts.get(kind, 0) / total
        if width:
            parts.append(f'<rect class="k-{kind}" x="{x:.1f}" y="0" width="{width:.1f}" '
                         f'height="12"><title>{kind}: {counts.get(kind, 0)}</title></rect>')
            x += width
    return (f'<svg width="200" height="12" role="img" aria-label="GPU use">'
            f"{''.join(parts)}</svg>")
