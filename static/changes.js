// The "Changes" panel of a task: every file it created or edited, with the diff (unified on
// narrow screens, side by side on wide ones), and Revert per file or for the whole task, each
// after a confirmation. The server (GET /api/tasks/<id>/changes, POST .../revert) does the work.
(function () {
  "use strict";
  const el = window.agentkitEl;

  function sideBySide(diff) {
    const table = el("table", { class: "diff-sbs" });
    let left = [], right = [];
    const flush = () => {
      const n = Math.max(left.length, right.length);
      for (let i = 0; i < n; i++) {
        const l = left[i], r = right[i];
        table.append(el("tr", {},
          el("td", { class: l ? l.cls : "empty", text: l ? l.text : "" }),
          el("td", { class: r ? r.cls : "empty", text: r ? r.text : "" })));
      }
      left = []; right = [];
    };
    for (const line of diff.split("\n")) {
      if (line.startsWith("---") || line.startsWith("+++") || line === "") continue;
      if (line.startsWith("@@")) { flush(); table.append(el("tr", { class: "hunk" }, el("td", { colspan: "2", text: line }))); continue; }
      if (line.startsWith("-")) left.push({ cls: "del", text: line.slice(1) });
      else if (line.startsWith("+")) right.push({ cls: "add", text: line.slice(1) });
      else { flush(); const t = line.slice(1); table.append(el("tr", {}, el("td", { text: t }), el("td", { text: t }))); }
    }
    flush();
    return el("div", { class: "diff-sbs-wrap" }, table);
  }

  async function call(url, method, body) {
    const resp = await fetch(url, {
      method, credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": window.agentkitCsrf() },
      body: body ? JSON.stringify(body) : undefined,
    });
    const data = await resp.json().catch(() => ({}));
    if (!resp.ok) throw new Error((data.error && data.error.message) || "HTTP " + resp.status);
    return data;
  }

  const STATE_TEXT = { applied: "changed by this task", reverted: "reverted", changed_since: "changed since: revert by hand", changed_later: "changed by a later task", created: "created by this task" };

  async function load(view, panel) {
    panel.replaceChildren(el("p", { class: "hint", text: "Loading changes…" }));
    let data;
    try { data = await call("/api/tasks/" + view.id + "/changes", "GET"); } catch (err) {
      panel.replaceChildren(el("p", { class: "error", role: "alert", text: "Could not load the changes: " + err.message }));
      return;
    }
    const status = el("p", { class: "hint", role: "status", "data-role": "revert-status" });
    // What is left: the files whose changes are still there; reverted ones are listed apart.
    const left = data.files.filter((f) => f.state !== "reverted").length;
    const reverted = data.files.length - left;
    const summary = left === 0 ? "Nothing left: every change of this task is reverted"
      : left + " file" + (left === 1 ? "" : "s") + " changed" + (reverted ? " · " + reverted + " reverted" : "");
    const head = el("div", { class: "changes-head" }, el("h4", { "data-role": "changes-summary", text: summary }));
    if (data.files.some((f) => f.revertible)) {
      const all = el("button", { type: "button", class: "danger", "data-role": "revert-all", text: "Revert all" });
      all.addEventListener("click", () => revert(view, panel, null, status));
      head.append(all);
    }
    panel.replaceChildren(head, status);
    for (const f of data.files) {
      const fileHead = el("div", { class: "change-file-head" },
        el("code", { class: "change-path", text: f.path }),
        el("span", { class: "badge change-state-" + f.state, "data-role": "change-state", text: STATE_TEXT[f.state] || f.state }));
      if (f.revertible) {
        const b = el("button", { type: "button", class: "secondary", "data-role": "revert-file", text: "Revert", "aria-label": "Revert " + f.path });
        b.addEventListener("click", () => revert(view, panel, f.path, status));
        fileHead.append(b);
      }
      let body = el("div", { class: "change-diff" }, el("div", { class: "diff-unified" }, window.agentkitDiffView(f.diff)), sideBySide(f.diff));
      if (f.state === "reverted") body = el("details", { class: "reverted-diff" }, el("summary", { text: "the reverted change" }), body);
      panel.append(el("section", { class: "change-file", "data-path": f.path, "data-state": f.state }, fileHead, f.note ? el("p", { class: "hint", "data-role": "change-note", text: f.note }) : null, body));
    }
  }

  async function revert(view, panel, path, status) {
    const what = path ? path : "every file this task changed";
    if (!confirm("Revert " + what + " to its content before task #" + view.id + "? Later changes to it are lost.")) return;
    try {
      const data = await call("/api/tasks/" + view.id + "/revert", "POST", path ? { path } : {});
      await load(view, panel);
      panel.querySelector("[data-role=revert-status]").textContent = "Reverted: " + data.reverted.join(", ");
    } catch (err) {
      status.textContent = "Not reverted: " + err.message;
    }
  }

  function toggle(view) {
    let panel = view.root.querySelector(".changes-panel");
    if (panel) { panel.remove(); return; }
    panel = el("section", { class: "changes-panel", "aria-label": "Changes of task " + view.id });
    view.header.after(panel);
    load(view, panel);
  }

  window.agentkitChanges = { toggle, load };
})();
