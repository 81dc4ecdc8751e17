// gangkeeper view: polls /api/state and re-renders the queue table in place. Cells get
// textContent only: nothing from the cluster is ever parsed as HTML.
"use strict";
(function () {
  const body = document.body;
  const api = body.dataset.api;
  const every = Number(body.dataset.refresh) || 5000;
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

  async function refresh() {
    try {
      const answer = await fetch(api, { cache: "no-store" });
      if (!answer.ok) return;
      const state = await answer.json();
      const tbody = document.querySelector("#queue tbody");
      if (tbody) tbody.replaceChildren(...state.rows.map(row));
      const caption = document.querySelector("#queue caption");
      if (caption) caption.textContent = state.rows.length + " gangs" + (caption.dataset.suffix || "");
      const empty = document.getElementById("empty");
      if (empty) empty.hidden = state.rows.length > 0;
      const notes = document.getElementById("notes");
      if (notes) {
        notes.replaceChildren(...(state.notes || []).map(function (text) {
          const li = document.createElement("li");
          li.textContent = text;
          return li;
        }));
        notes.hidden = !notes.children.length;
      }
      const updated = document.getElementById("updated");
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
  if (api) setInterval(refresh, every);
})();
