// The "Changes" panel of a task: every file it created or edited, with the diff (unified on
// narrow screens, side by side on wide ones), and Revert per file or for the whole task, each
// after a confirmation. The server (GET /api/tasks/<id>/changes, POST .../revert) does the work.
// A task on a repository workspace also shows its branch (base...branch: files, +/−, the diff,
// its commits) with its hand-offs: Download patch, Merge, Push, Discard (docs/repositories.md);
// a refused hand-off says why (and names the conflicting files).
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
    const branchBox = data.branch ? branchSection(view, panel, data.branch) : null;
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
    panel.replaceChildren(...(branchBox ? [branchBox] : []), head, status);
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

  const HANDOFFS = {
    merge: (b) => "Merge " + b.branch + " into " + b.base + "?",
    push: (b) => "Push " + b.branch + " to the workspace's remote?",
    discard: (b) => "Delete " + b.branch + " and its worktree? Its commits are lost unless pushed or merged.",
  };
  const DONE = {
    merge: (d) => "Merged into " + d.base + " (" + d.merged + ", " + String(d.commit).slice(0, 10) + ")",
    push: (d) => "Pushed " + d.pushed + " to " + d.remote,
    discard: (d) => "Discarded " + d.discarded,
  };

  function branchSection(view, panel, b) {
    const box = el("section", { class: "branch-box", "data-role": "branch", "data-branch": b.branch });
    const counts = b.files.reduce((acc, f) => [acc[0] + f.additions, acc[1] + f.deletions], [0, 0]);
    box.append(el("div", { class: "changes-head" },
      el("h4", {}, "Branch ", el("code", { "data-role": "branch-name", text: b.branch }), " from ", el("code", { text: b.base })),
      el("span", { class: "hint", "data-role": "branch-stat", text: b.files.length + " file" + (b.files.length === 1 ? "" : "s") + " · +" + counts[0] + " −" + counts[1] })));
    const note = el("p", { class: "hint", role: "status", "data-role": "handoff-status" });
    if (!b.exists) {
      box.append(el("p", { class: "hint", "data-role": "branch-gone", text: "The branch was discarded." }));
      return box;
    }
    const actions = el("div", { class: "branch-actions" },
      el("a", { class: "button secondary", "data-role": "download-patch", href: "/api/tasks/" + view.id + "/patch", download: "task-" + view.id + ".patch", text: "Download patch" }));
    for (const action of ["merge", "push", "discard"]) {
      const button = el("button", { type: "button", class: action === "discard" ? "danger" : "secondary", "data-role": "handoff-" + action, text: action[0].toUpperCase() + action.slice(1) });
      button.addEventListener("click", () => handoff(view, panel, action, b, note));
      actions.append(button);
    }
    box.append(actions, note);
    const commits = el("ol", { class: "branch-commits", "data-role": "branch-commits" });
    for (const c of b.commits) {
      commits.append(el("li", { "data-sha": c.sha }, el("code", { text: c.sha.slice(0, 10) }), " " + c.subject + " ", el("span", { class: "hint", text: "by " + c.author + ", committed by " + c.committer })));
    }
    box.append(b.commits.length ? commits : el("p", { class: "hint", "data-role": "branch-commits", text: b.merged ? "Every commit of this branch is in " + b.base + "." : "No commits yet." }));
    const files = el("ul", { class: "branch-files", "data-role": "branch-files" });
    for (const f of b.files) files.append(el("li", {}, el("code", { text: f.path }), el("span", { class: "add", text: " +" + f.additions }), el("span", { class: "del", text: " −" + f.deletions })));
    if (b.files.length) box.append(files, el("details", { class: "branch-diff" }, el("summary", { text: "the diff " + b.base + "..." + b.branch }), el("div", { class: "diff-unified" }, window.agentkitDiffView(b.diff))));
    return box;
  }

  async function handoff(view, panel, action, b, note) {
    if (!confirm(HANDOFFS[action](b))) return;
    note.textContent = "Working…";
    let data;
    try {
      const resp = await fetch("/api/tasks/" + view.id + "/" + action, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": window.agentkitCsrf() }, body: "{}",
      });
      data = await resp.json().catch(() => ({}));
      if (!resp.ok) {
        const e = data.error || {};
        note.replaceChildren(el("span", { class: "error", role: "alert", "data-role": "handoff-refused", "data-code": e.code || "", text: "Not done: " + (e.message || "HTTP " + resp.status) }));
        if (e.files && e.files.length) note.append(el("ul", { "data-role": "conflict-files" }, ...e.files.map((f) => el("li", {}, el("code", { text: f })))));
        return;
      }
    } catch (err) {
      note.textContent = "Not done: " + err.message;
      return;
    }
    await load(view, panel);
    const fresh = panel.querySelector("[data-role=handoff-status]");
    if (fresh) fresh.textContent = DONE[action](data);
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
