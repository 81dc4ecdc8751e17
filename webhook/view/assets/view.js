// gangkeeper view: polls the page's JSON (body's data-api: /api/state for the queue,
// /api/gang/NS/LABEL for a gang, /api/fleet for the fleet) and redraws the page's
// tables in place. Cells get textContent only: nothing from the cluster is ever parsed
// as HTML.
"use strict";
(function () {
  const body = document.body;
  const api = body.dataset.api;
  const page = body.dataset.page;
  const every = Number(body.dataset.refresh) || 5000;
  const SVG = "http://www.w3.org/2000/svg";

  function el(tag, text, attrs) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    return node;
  }

  // A <table> with a caption, column headers and rows of cells (nodes or texts); the
  // first cell of each row is its header (<th scope="row">) unless rowHeaders is false.
  function table(attrs, caption, columns, rows, rowHeaders) {
    const t = el("table", null, attrs);
    t.appendChild(el("caption", caption));
    const head = el("tr");
    for (const name of columns) head.appendChild(el("th", name, { scope: "col" }));
    t.appendChild(el("thead")).appendChild(head);
    const tbody = t.appendChild(el("tbody"));
    for (const cells of rows) {
      const tr = tbody.appendChild(el("tr"));
      cells.forEach(function (cell, i) {
        const c = i === 0 && rowHeaders !== false ? el("th", null, { scope: "row" }) : el("td");
        if (cell instanceof Node) c.appendChild(cell); else c.textContent = cell;
        tr.appendChild(c);
      });
    }
    return t;
  }

  function span(look) {
    const attrs = { class: look.class };
    if (look.title) attrs.title = look.title;
    return el("span", look.text, attrs);
  }
  const columns = ["position", "gang", "state", "members", "priority", "age", "reason", "ahead"];

  function row(gang) {
    const tr = document.createElement("tr");
    tr.dataset.gang = gang.cells.gang;
    if (gang.flags.length) tr.className = "flagged";
    for (const key of columns) {
      const cell = document.createElement(key === "gang" ? "th" : "td");
      if (key === "gang") {
        cell.scope = "row";
        const a = document.createElement("a");
        a.href = gang.href;
        a.textContent = gang.cells.gang;
        cell.appendChild(a);
      } else {
        cell.dataset.col = key;
        cell.textContent = gang.cells[key];
        if (key === "state" && gang.flags.length) {
          const flag = document.createElement("strong");
          flag.className = "flag";
          flag.textContent = " ! " + gang.cells.flags;
          cell.appendChild(flag);
        }
      }
      tr.appendChild(cell);
    }
    return tr;
  }

  function queue(state) {
    const tbody = document.querySelector("#queue tbody");
    if (tbody) tbody.replaceChildren(...state.rows.map(row));
    const caption = document.querySelector("#queue caption");
    if (caption) caption.textContent = state.rows.length + " gangs" + (caption.dataset.suffix || "");
    const empty = document.getElementById("empty");
    if (empty) empty.hidden = state.rows.length > 0;
  }

  function gang(state) {
    const g = state.gang;
    const facts = document.getElementById("facts");
    if (facts) {
      facts.replaceChildren(...g.facts.flatMap(function (pair) {
        return [el("dt", pair[0]), el("dd", pair[1])];
      }));
    }
    const members = document.querySelector("#members tbody");
    if (members) {
      const rows = table({}, "", [], g.members.map(function (m) { return m.cells; }));
      members.replaceChildren(...rows.tBodies[0].rows);
    }
    const events = document.getElementById("events");
    if (events) {
      const e = g.events;
      events.replaceChildren(e.rows.length ? table({}, e.caption, e.columns, e.rows, false)
        : el("p", e.none));
    }
    const explain = document.getElementById("explain");
    if (explain) explain.textContent = g.explain;
  }

  function bar(counts, total) {
    const svg = document.createElementNS(SVG, "svg");
    for (const [key, value] of Object.entries({ width: 200, height: 12, role: "img",
                                                  "aria-label": "GPU use" })) {
      svg.setAttribute(key, value);
    }
    let x = 0;
    for (const [kind, count] of Object.entries(counts)) {
      const width = total ? 200 * count / total : 0;
      if (!width) continue;
      const rect = document.createElementNS(SVG, "rect");
      for (const [key, value] of Object.entries({ class: "k-" + kind, x: x.toFixed(1), y: 0,
                                                    width: width.toFixed(1), height: 12 })) {
        rect.setAttribute(key, value);
      }
      const title = document.createElementNS(SVG, "title");
      title.textContent = kind + ": " + count;
      rect.appendChild(title);
      svg.appendChild(rect);
      x += width;
    }
    return svg;
  }

  function fleet(state) {
    const summary = document.getElementById("fleet-summary");
    if (summary) summary.textContent = state.summary;
    const legend = document.querySelector("#legend tbody");
    if (legend) {
      legend.replaceChildren(...state.legend.map(function (entry) {
        const tr = el("tr");
        tr.appendChild(el("td")).appendChild(span(entry.cell));
        tr.appendChild(el("td", entry.meaning));
        return tr;
      }));
    }
    const grid = document.getElementById("fleet");
    if (!grid) return;
    let tables;
    if (state.aggregated) {
      const note = grid.querySelector("p.note");
      tables = [table({ class: "shapes" }, "Node shapes", state.columns,
        state.shapes.map(function (s) { return s.cells.concat([bar(s.counts, s.gpus)]); }))];
      tables[0].querySelectorAll("tbody td:last-child").forEach(function (td) { td.className = "bars"; });
      if (note) tables.unshift(note);
    } else {
      tables = state.groups.map(function (group) {
        return table({ class: "fleet" }, group.caption, state.columns,
          group.nodes.map(function (n) {
            const name = document.createDocumentFragment();
            name.append(n.name);
            for (const mark of n.marks) name.append(" ", span(mark));
            const cells = document.createDocumentFragment();
            cells.append(...n.cells.map(span));
            return [name, n.resource, cells];
          }));
      });
      tables.forEach(function (t) {
        t.querySelectorAll("tbody td:last-child").forEach(function (td) { td.className = "cells"; });
      });
      if (!tables.length) tables = [el("p", "No GPU nodes.")];
    }
    grid.replaceChildren(...tables);
  }

  const draw = { queue: queue, gang: gang, fleet: fleet }[page];

  async function refresh() {
    try {
      const answer = await fetch(api, { cache: "no-store" });
      const state = await answer.json();
      const updated = document.getElementById("updated");
      if (answer.status === 404 && page === "gang") {
        // The gang left the cluster (deleted, finished): say so, keep what it showed.
        if (updated) updated.textContent = "Updated " + state.updated + ": this gang is no longer in the cluster";
        return;
      }
      if (!answer.ok || !state.generated) return;
      draw(state);
      const notes = document.getElementById("notes");
      if (notes) {
        notes.replaceChildren(...(state.notes || []).map(function (text) {
          const li = document.createElement("li");
          li.textContent = text;
          return li;
        }));
        notes.hidden = !notes.children.length;
      }
      if (updated && state.updated) {
        updated.textContent = "Updated " + state.updated + (state.error ? " (read failed: " + state.error + ")" : "");
      }
    } catch (e) {
      // The server stopped or the network blinked: try again next time.
    }
  }

  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", function () {
      const text = document.getElementById(button.dataset.copy).textContent;
      if (navigator.clipboard) navigator.clipboard.writeText(text);
    });
  }
  if (api && draw) setInterval(refresh, every);
})();
