// agentkit chat page: team_collab rendering. turns.js calls window.agentkitRenderers[type](view, ev)
// after its own renderer for that type; renderers of other scripts for the same type still run.
// Renders the team board (a table: each spec phase with its expert, state, duration, check and a
// link to its notes), phase and rollback notes,
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
    ".team-board { padding:.3rem 0 0; font-size:.85rem; max-height:40vh; overflow:auto; }",
    ".team-board table { border-collapse:collapse; width:100%; }",
    ".team-board th, .team-board td { text-align:left; padding:.15rem .5rem; border-bottom:1px solid #eaecf0; vertical-align:top; overflow-wrap:anywhere; }",
    ".team-board th { font-size:.75rem; text-transform:uppercase; color:#667085; font-weight:600; }",
    ".team-board td.phase-status span { padding:0 .45rem; border-radius:999px; border:1px solid #d0d5dd; color:#667085; white-space:nowrap; }",
    ".team-board tr[data-state=running] td.phase-status span { background:#eff8ff; border-color:#2e90fa; color:#175cd3; font-weight:600; }",
    ".team-board tr[data-state=completed] td.phase-status span { background:#ecfdf3; border-color:#abefc6; color:#067647; }",
    ".team-board tr[data-state=failed] td.phase-status span, .team-board tr[data-state=skipped] td.phase-status span { background:#fef3f2; border-color:#fda29b; color:#b42318; }",
    ".team-board tr[data-state=rolled_back] td.phase-status span { background:#fffaeb; border-color:#fedf89; color:#93370d; }",
    ".team-board code { font-size:.8em; }",
    "@media (max-width:760px) { .team-board th.col-checks, .team-board td.phase-checks { display:none; } }",
    ".note.team-note { border-left-color:#2e90fa; }",
    ".note.rollback-note { border-left-color:#f79009; color:#93370d; }",
    ".resume-bar { margin:.4rem .7rem; padding:.4rem .6rem; border:1px solid #fedf89; background:#fffaeb; border-radius:8px; font-size:.9rem; }",
    ".resume-bar button { margin-left:.6rem; }",
  ].join("\n") }));

  function board(view) {
    return view.root.querySelector(".team-board");
  }

  const STATE_TEXT = { pending: "waiting", running: "running", completed: "done", failed: "failed", skipped: "skipped", rolled_back: "rolled back" };

  // The team board: a table in the task's (sticky) header, one row per spec phase — phase,
  // expert, status, duration, its check (validation command), a link to its events.
  function showBoard(view, phases) {
    let node = board(view);
    if (!node) {
      const head = el("tr", {}, ...["Phase", "Expert", "Status", "Time", "Check", ""].map((t, i) =>
        el("th", { scope: "col", class: i === 4 ? "col-checks" : "", text: t })));
      node = el("div", { class: "team-board", "data-role": "team-board", "aria-label": "team phases" },
        el("table", {}, el("thead", {}, head), el("tbody")));
      view.header.append(node);
    }
    for (const phase of phases || []) row(view, node, typeof phase === "string" ? { id: phase } : phase);
    return node;
  }

  function row(view, node, phase) {
    const body = node.querySelector("tbody");
    let tr = body.querySelector("tr[data-phase-id='" + CSS.escape(phase.id) + "']");
    if (!tr) {
      const link = el("a", { href: "#", class: "phase-events", "data-role": "phase-events", text: "events", hidden: "" });
      link.addEventListener("click", (e) => {
        e.preventDefault();
        const first = view.body.querySelector(".note.team-note[data-phase-id='" + CSS.escape(phase.id) + "']");
        if (first) first.scrollIntoView({ block: "center" });
      });
      tr = el("tr", { "data-phase-id": phase.id, "data-state": "pending" },
        el("td", { class: "phase-title", text: phase.id }),
        el("td", { class: "phase-role" }),
        el("td", { class: "phase-status" }, el("span", { text: STATE_TEXT.pending })),
        el("td", { class: "phase-duration" }),
        el("td", { class: "phase-checks" }),
        el("td", {}, link));
      body.append(tr);
    }
    if (phase.title) tr.querySelector(".phase-title").textContent = phase.title;
    if (phase.title) tr.title = phase.id;
    if (phase.role) tr.querySelector(".phase-role").textContent = phase.role;
    if (phase.validation_command) tr.querySelector(".phase-checks").replaceChildren(el("code", { text: phase.validation_command }));
    return tr;
  }

  function seconds(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    return s < 60 ? s + " s" : Math.floor(s / 60) + " min " + (s % 60) + " s";
  }

  function mark(view, ev, state) {
    const d = ev.data;
    const tr = row(view, showBoard(view, []), { id: d.phase_id, title: d.title, role: d.role });
    tr.dataset.state = state;
    tr.querySelector(".phase-status span").textContent = STATE_TEXT[state] || state;
    const at = Date.parse(ev.ts);
    if (state === "running") tr.dataset.startedAt = String(at);
    else if (tr.dataset.startedAt && at) tr.querySelector(".phase-duration").textContent = seconds(at - Number(tr.dataset.startedAt));
    tr.querySelector("[data-role=phase-events]").hidden = false;
  }

  // A note of a phase; the board's "events" link scrolls to the first one.
  function phaseNote(view, cls, d, text) {
    note(view, cls, text);
    const added = view.body.lastElementChild;
    if (added && d.phase_id) added.dataset.phaseId = d.phase_id;
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
    if (board(view)) showBoard(view, (ev.data.spec || {}).phases || []);
  });
  chained("phase_started", (view, ev) => {
    const d = ev.data;
    mark(view, ev, "running");
    phaseNote(view, "team-note", d, "Phase " + d.phase_id + " (" + d.title + ") — the " + d.role + " starts.");
  });
  chained("phase_completed", (view, ev) => {
    const d = ev.data;
    mark(view, ev, "completed");
    phaseNote(view, "team-note", d, "Phase " + d.phase_id + " done" + (d.resumed ? " (from its checkpoint)." : "."));
  });
  chained("phase_failed", (view, ev) => {
    const d = ev.data, e = d.error_struct || {};
    mark(view, ev, d.status === "skipped" ? "skipped" : "failed");
    phaseNote(view, "team-note", d, d.status === "skipped"
      ? "Phase " + d.phase_id + " is not run: it depends on " + d.failed_dependency + ", which failed."
      : "Phase " + d.phase_id + " failed: [" + (e.error_code || "error") + "] " + (e.message || ""));
  });
  chained("phase_rollback_started", (view, ev) => {
    note(view, "rollback-note", "Rolling back phase " + ev.data.phase_id + ": " + ev.data.command);
  });
  chained("phase_rollback_completed", (view, ev) => {
    mark(view, ev, "rolled_back");
    note(view, "rollback-note", "Phase " + ev.data.phase_id + " rolled back.");
  });
  chained("phase_rollback_failed", (view, ev) => {
    const d = ev.data;
    note(view, "rollback-note", "Rollback of phase " + d.phase_id + " failed" + (d.timed_out ? " (timed out)" : "") + ": " + (d.output || "exit " + d.exit_code) + " — no checkpoint was saved.");
  });
})();
