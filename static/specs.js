// agentkit chat page: the spec review gate (plan_exec). turns.js calls
// window.agentkitRenderers[type](view, ev) for each event; `view` is the task's {root, body, ...}.
// - spec_review_request: a spec card (goal, phases with roles and dependencies, verification
//   commands, acceptance criteria) with Confirm, and Reject with feedback; the reply goes over the
//   socket as `spec_review_reply`. The card is built from the events, so a reload rebuilds it and
//   it still works while the review is pending.
// - spec_review_resolved: the card shows the decision; a timed-out review parks the task and the
//   card offers Resume (= confirm the parked spec: the task continues from it).
// - The sidebar's "Parked" section lists parked specs (GET /api/specs?status=parked), each with
//   Resume (POST /api/specs/<id>/review) and a link to its task.
(function () {
  "use strict";
  const el = window.agentkitEl;
  const chat = window.agentkitChat;
  const DECISIONS = {
    confirmed: "Confirmed: running the spec.",
    rejected: "Rejected: the planner revises the spec.",
    timed_out: "No decision in time: the task is parked. Resume confirms this spec and continues.",
    cancelled: "Review cancelled.",
  };

  document.head.append(el("style", { "data-from": "specs.js", text: [
    ".spec-card { border:1px solid #b2ddff; border-radius:8px; margin:.5rem 0; background:#f5faff; padding:.5rem .8rem; }",
    ".spec-card h4 { margin:.1rem 0 .4rem; font-size:.95rem; }",
    ".spec-card .spec-goal { font-weight:600; margin:.2rem 0; }",
    ".spec-card .spec-summary { color:#475467; margin:.2rem 0 .4rem; }",
    ".spec-card ol.spec-phases { margin:.2rem 0 .5rem 1.2rem; padding:0; }",
    ".spec-card .phase-role { display:inline-block; font-size:.75rem; padding:0 .4rem; border-radius:999px; background:#eef4ff; color:#3538cd; margin-left:.3rem; }",
    ".spec-card .phase-deps, .spec-card .phase-instructions { color:#667085; font-size:.85rem; }",
    ".spec-card code { background:#eaecf0; padding:0 .25rem; border-radius:4px; }",
    ".spec-card .spec-label { font-size:.8rem; color:#667085; text-transform:uppercase; letter-spacing:.03em; margin-top:.4rem; }",
    ".spec-card .spec-actions { display:flex; flex-wrap:wrap; gap:.5rem; align-items:flex-start; margin-top:.6rem; }",
    ".spec-card textarea { flex:1 1 16rem; min-height:2.6rem; font:inherit; }",
    ".spec-card button[data-role=confirm], .spec-card button[data-role=resume] { background:var(--accent, #175cd3); color:#fff; border:0; border-radius:6px; padding:.35rem 1rem; font-weight:600; }",
    ".spec-card button:disabled { opacity:.6; cursor:default; }",
    ".spec-card .spec-decision { margin-top:.5rem; font-weight:600; color:#175cd3; }",
    ".spec-card.resolved-rejected, .spec-card.resolved-cancelled { opacity:.75; border-color:#d0d5dd; background:#f9fafb; }",
    ".spec-card.resolved-timed_out { border-color:#fedf89; background:#fffcf5; }",
    ".badge.status-awaiting_review, .badge.status-parked { background:#fef0c7; color:#93370d; }",
    ".parked-specs { margin:.6rem 0; }",
    ".parked-specs h3 { font-size:.9rem; margin:.2rem 0; }",
    ".parked-specs ul { list-style:none; margin:0; padding:0; }",
    ".parked-specs li { display:flex; gap:.4rem; align-items:center; justify-content:space-between; font-size:.85rem; padding:.2rem 0; }",
  ].join("\n") }));

  function list(items, render) {
    const node = el("ul", {});
    for (const item of items) node.append(el("li", {}, render(item)));
    return node;
  }

  function phaseItem(phase) {
    const item = el("li", { "data-phase-id": phase.id },
      el("span", { class: "phase-title", text: phase.title }),
      el("span", { class: "phase-role", "data-role": "phase-role", text: phase.role || "coder" }));
    if ((phase.depends_on || []).length) item.append(el("div", { class: "phase-deps", text: "after: " + phase.depends_on.join(", ") }));
    if (phase.instructions) item.append(el("div", { class: "phase-instructions", text: phase.instructions }));
    if (phase.validation_command) item.append(el("div", { class: "phase-deps" }, "check: ", el("code", { text: phase.validation_command })));
    return item;
  }

  function specCard(ev) {
    const d = ev.data;
    const spec = d.spec || {};
    const card = el("section", { class: "spec-card", "data-spec-review-id": d.spec_review_id, "data-spec-id": String(d.spec_id), "data-revision": String(d.revision), "aria-label": "Spec revision " + d.revision });
    card.append(el("h4", { text: "Spec · revision " + d.revision + " · waiting for your review" }),
      el("div", { class: "spec-goal", text: spec.goal || d.goal || "" }));
    if (spec.summary) card.append(el("div", { class: "spec-summary", text: spec.summary }));
    card.append(el("div", { class: "spec-label", text: "Phases" }));
    const phases = el("ol", { class: "spec-phases" });
    for (const phase of spec.phases || []) phases.append(phaseItem(phase));
    card.append(phases);
    if ((spec.verification_commands || []).length) {
      card.append(el("div", { class: "spec-label", text: "Verification commands" }),
        list(spec.verification_commands, (c) => el("code", { "data-role": "verification-command", text: c })));
    }
    if ((spec.acceptance_criteria || []).length) {
      card.append(el("div", { class: "spec-label", text: "Acceptance criteria" }),
        list(spec.acceptance_criteria, (c) => el("span", { text: c })));
    }
    const feedback = el("textarea", { "data-role": "feedback", placeholder: "What should change? (needed to reject)", "aria-label": "Feedback for the planner" });
    const confirmButton = el("button", { type: "button", "data-role": "confirm", text: "Confirm" });
    const rejectButton = el("button", { type: "button", class: "secondary", "data-role": "reject", text: "Reject" });
    const actions = el("div", { class: "spec-actions", "data-role": "spec-actions" }, confirmButton, feedback, rejectButton);
    confirmButton.addEventListener("click", () => reply(card, "confirm", ""));
    rejectButton.addEventListener("click", () => {
      const text = feedback.value.trim();
      if (!text) { feedback.focus(); feedback.setAttribute("aria-invalid", "true"); feedback.placeholder = "Say what to change, then Reject"; return; }
      reply(card, "reject", text);
    });
    card.append(actions);
    return card;
  }

  function reply(card, decision, feedback) {
    card.querySelectorAll("[data-role=spec-actions] button").forEach((b) => { b.disabled = true; });
    chat.send({ type: "spec_review_reply", spec_review_id: card.dataset.specReviewId, decision, feedback });
  }

  function resolve(card, d) {
    card.classList.add("resolved-" + d.decision);
    const actions = card.querySelector("[data-role=spec-actions]");
    if (actions) actions.remove();
    card.querySelector("h4").textContent = "Spec · revision " + d.revision + " · " + d.decision.replace("_", " ");
    const note = el("div", { class: "spec-decision", "data-role": "spec-decision", text: DECISIONS[d.decision] || d.decision });
    if (d.decision === "rejected" && d.feedback) note.append(el("div", { class: "phase-deps", text: "Feedback: " + d.feedback }));
    card.append(note);
    if (d.decision === "timed_out") {
      const resume = el("button", { type: "button", "data-role": "resume", text: "Resume" });
      resume.addEventListener("click", () => { resume.disabled = true; chat.send({ type: "spec_review_reply", spec_review_id: d.spec_review_id, decision: "confirm", feedback: "" }); });
      card.append(resume);
    }
  }

  const label = window.agentkitStatusLabel || String;
  const LABELS = { awaiting_review: "Waiting for your review", parked: "Parked: confirm the spec to go on" };
  window.agentkitStatusLabel = (status) => LABELS[status] || label(status);

  const renderers = window.agentkitRenderers = window.agentkitRenderers || {};
  const previous = { started: renderers.task_started, finished: renderers.task_finished, request: renderers.spec_review_request };

  renderers.spec_review_request = (view, ev) => {
    if (previous.request) previous.request(view, ev);
    view.body.append(specCard(ev));
    view.text = null;
    view.setStatus("awaiting_review");
  };
  renderers.spec_review_resolved = (view, ev) => {
    const card = view.root.querySelector('.spec-card[data-spec-review-id="' + ev.data.spec_review_id + '"]');
    if (card) resolve(card, ev.data);
    if (ev.data.decision === "confirmed") view.setStatus("running");
    view.text = null;
  };
  renderers.task_started = (view, ev) => {
    if (previous.started) previous.started(view, ev);
    // A continuation run (a parked spec confirmed): its Resume buttons have done their job.
    view.root.querySelectorAll(".spec-card [data-role=resume]").forEach((b) => b.remove());
  };
  renderers.task_finished = (view, ev) => {
    if (previous.finished) previous.finished(view, ev);
    if (ev.data.status === "parked" || view.root.querySelector(".spec-card")) parked.refresh();
  };

  // ── the sidebar's "Parked" section ─────────────────────────────────────────────────────────
  const parked = {
    node: null,
    mount() {
      const history = document.getElementById("task-history");
      if (!history || this.node) return;
      this.node = el("section", { class: "parked-specs", id: "parked-specs", "aria-label": "Parked specs", hidden: "" },
        el("h3", { text: "Parked" }), el("ul", { "data-role": "parked-list" }));
      history.before(this.node);
    },
    async refresh() {
      this.mount();
      if (!this.node) return;
      const resp = await fetch("/api/specs?status=parked", { credentials: "same-origin" }).catch(() => null);
      if (!resp || !resp.ok) return;
      const specs = (await resp.json()).specs || [];
      const items = this.node.querySelector("[data-role=parked-list]");
      items.replaceChildren();
      for (const spec of specs) {
        const open = el("a", { href: "#task-" + spec.task_id, text: "#" + spec.task_id + " " + (spec.goal || "").slice(0, 60) });
        open.addEventListener("click", (e) => { e.preventDefault(); window.agentkitOpenTask(spec.task_id); });
        const resume = el("button", { type: "button", class: "secondary", "data-role": "resume-parked", "data-spec-id": String(spec.id), text: "Resume" });
        resume.addEventListener("click", () => this.resume(spec, resume));
        items.append(el("li", { "data-task-id": String(spec.task_id) }, open, resume));
      }
      this.node.hidden = specs.length === 0;
    },
    async resume(spec, button) {
      button.disabled = true;
      const resp = await fetch("/api/specs/" + spec.id + "/review", {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": window.agentkitCsrf() },
        body: JSON.stringify({ decision: "confirm", feedback: "" }),
      });
      if (!resp.ok) {
        const body = await resp.json().catch(() => ({}));
        alert("Could not resume: " + ((body.error && body.error.message) || resp.status));
        button.disabled = false;
        return;
      }
      window.agentkitOpenTask(spec.task_id);
      const view = chat.state.tasks[spec.task_id];
      chat.send({ type: "resume", task_id: spec.task_id, after_seq: view ? view.lastSeq : 0 });
      this.refresh();
    },
  };
  window.agentkitParked = parked;
  parked.refresh();
})();
