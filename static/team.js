// agentkit chat page: team_collab rendering. chat.js calls window.agentkitRenderers[type](view, ev)
// after its own renderer for that type; renderers of other scripts for the same type still run.
// Renders the team board (each spec phase with its expert and state), phase and rollback notes,
// and — for a team_collab or plan_exec task whose process died mid-run (GET /api/tasks/<id> says
// `resumable`) — a Resume button (POST /api/tasks/<id>/resume: the task goes on from its
// checkpoints; finished phases are not run again).
(function () {
  "use strict";
  const FINISHED = ["completed", "failed", "cancelled", "gave_up_after_reflections", "parked"];
  const CHECK_MS = 5000;  // how often a running team task asks whether it was interrupted

  const el = window.agentkitEl, note = window.agentkitNote;  // chat.js's helpers
  const csrfToken = window.agentkitCsrf;

  document.head.append(el("style", { "data-from": "team.js", text: [
    ".team-board { padding:.3rem .7rem; font-size:.85rem; }",
    ".team-board ol { display:flex; flex-wrap:wrap; gap:.3rem; list-style:none; margin:0; padding:0; }",
    ".team-board li { padding:.1rem .55rem; border-radius:999px; border:1px solid #d0d5dd; color:#667085; }",
    ".team-board li[data-state=running] { background:#eff8ff; border-color:#2e90fa; color:#175cd3; font-weight:600; }",
    ".team-board li[data-state=completed] { background:#ecfdf3; border-color:#abefc6; color:#067647; }",
    ".team-board li[data-state=failed], .team-board li[data-state=skipped] { background:#fef3f2; border-color:#fda29b; color:#b42318; }",
    ".team-board li[data-state=rolled_back] { background:#fffaeb; border-color:#fedf89; color:#93370d; }",
    ".note.team-note { border-left-color:#2e90fa; }",
    ".note.rollback-note { border-left-color:#f79009; color:#93370d; }",
    ".resume-bar { margin:.4rem .7rem; padding:.4rem .6rem; border:1px solid #fedf89; background:#fffaeb; border-radius:8px; font-size:.9rem; }",
    ".resume-bar button { margin-left:.6rem; }",
  ].join("\n") }));

  function board(view) {
    return view.root.querySelector(".team-board");
  }

  function showBoard(view, phases) {
    let node = board(view);
    if (!node) {
      node = el("div", { class: "team-board", "data-role": "team-board", "aria-label": "team phases" }, el("ol"));
      view.root.querySelector(".task-header").after(node);
    }
    const list = node.querySelector("ol");
    for (const id of phases || []) {
      if (!list.querySelector("[data-phase-id='" + CSS.escape(id) + "']")) {
        list.append(el("li", { "data-phase-id": id, "data-state": "pending", text: id }));
      }
    }
    return node;
  }

  function mark(view, d, state) {
    const node = showBoard(view, [d.phase_id]);
    const chip = node.querySelector("[data-phase-id='" + CSS.escape(d.phase_id) + "']");
    chip.dataset.state = state;
    chip.textContent = d.phase_id + (d.role ? " · " + d.role : "");
    chip.title = (d.title || "") + " — " + state;
  }

  // ── Resume for interrupted tasks ─────────────────────────────────────────────────────────────
  function watchInterrupted(view, taskId) {
    if (view.teamWatch) return;
    view.teamWatch = true;
    const check = async () => {
      if (FINISHED.includes(view.status)) { view.teamWatch = false; return; }
      try {
        const resp = await fetch("/api/tasks/" + taskId, { credentials: "same-origin" });
        if (resp.ok && (await resp.json()).resumable) showResume(view, taskId);
      } catch (err) { /* offline: try again later */ }
      setTimeout(check, CHECK_MS);
    };
    check();
  }

  function showResume(view, taskId) {
    if (view.root.querySelector("[data-role=resume-bar]")) return;
    const button = el("button", { type: "button", "data-role": "resume-task", text: "Resume" });
    const bar = el("div", { class: "resume-bar", "data-role": "resume-bar", role: "status" },
      el("span", { text: "This task was interrupted (its process stopped). Resume it from its last checkpoint: finished phases are not run again." }),
      button);
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const resp = await fetch("/api/tasks/" + taskId + "/resume", {
          method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() },
        });
        const data = await resp.json();
        if (!resp.ok) {
          bar.append(el("p", { class: "resume-error", role: "alert", text: (data.error && data.error.message) || "Resume failed." }));
          button.disabled = false;
          return;
        }
        bar.remove();
        note(view, "team-note", "Resumed from the last checkpoint.");
      } catch (err) {
        button.disabled = false;
      }
    });
    view.root.querySelector(".task-header").after(bar);
  }

  const renderers = window.agentkitRenderers = window.agentkitRenderers || {};
  const chained = (type, fn) => {
    const before = renderers[type];
    renderers[type] = (view, ev) => { if (before) before(view, ev); fn(view, ev); };
  };

  chained("task_started", (view, ev) => {
    if (ev.data.mode === "plan_exec") watchInterrupted(view, ev.task_id);
    if (ev.data.mode !== "team_collab") return;
    showBoard(view, ev.data.phases);
    watchInterrupted(view, ev.task_id);
  });
  chained("spec_review_request", (view, ev) => {
    // A team task's board lists the spec's phases as soon as there is a spec.
    if (board(view)) showBoard(view, ((ev.data.spec || {}).phases || []).map((p) => p.id));
  });
  chained("phase_started", (view, ev) => {
    const d = ev.data;
    mark(view, d, "running");
    note(view, "team-note", "Phase " + d.phase_id + " (" + d.title + ") — the " + d.role + " starts.");
  });
  chained("phase_completed", (view, ev) => {
    const d = ev.data;
    mark(view, d, "completed");
    note(view, "team-note", "Phase " + d.phase_id + " done" + (d.resumed ? " (from its checkpoint)." : "."));
  });
  chained("phase_failed", (view, ev) => {
    const d = ev.data, e = d.error_struct || {};
    mark(view, d, d.status === "skipped" ? "skipped" : "failed");
    note(view, "team-note", d.status === "skipped"
      ? "Phase " + d.phase_id + " is not run: it depends on " + d.failed_dependency + ", which failed."
      : "Phase " + d.phase_id + " failed: [" + (e.error_code || "error") + "] " + (e.message || ""));
  });
  chained("phase_rollback_started", (view, ev) => {
    note(view, "rollback-note", "Rolling back phase " + ev.data.phase_id + ": " + ev.data.command);
  });
  chained("phase_rollback_completed", (view, ev) => {
    mark(view, ev.data, "rolled_back");
    note(view, "rollback-note", "Phase " + ev.data.phase_id + " rolled back.");
  });
  chained("phase_rollback_failed", (view, ev) => {
    const d = ev.data;
    note(view, "rollback-note", "Rollback of phase " + d.phase_id + " failed" + (d.timed_out ? " (timed out)" : "") + ": " + (d.output || "exit " + d.exit_code) + " — no checkpoint was saved.");
  });
})();
