// agentkit chat page: plan_exec rendering. chat.js calls window.agentkitRenderers[type](view, ev)
// after its own renderer for that type (if any); `view` is the task's {root, body, ...}.
// Renders a phase stepper (current phase, budgets left), phase violations and exhausted budgets
// as notes, reflections as their own card, and the gave-up status distinct from failed.
(function () {
  "use strict";
  const PHASES = ["planning", "building", "verification", "delivery"];
  const STATUS_LABELS = { gave_up_after_reflections: "gave up after reflections" };

  const el = window.agentkitEl, note = window.agentkitNote;  // chat.js's helpers

  function stepper(view) {
    let node = view.root.querySelector(".phase-stepper");
    if (node) return node;
    const list = el("ol", { class: "phases" });
    for (const phase of PHASES) list.append(el("li", { "data-phase": phase, text: phase }));
    node = el("div", { class: "phase-stepper", "data-role": "phases", "aria-label": "plan phases" },
      list, el("span", { class: "budgets", "data-role": "budgets" }));
    view.root.querySelector(".task-header").after(node);
    return node;
  }

  function showPhase(view, phase, counters) {
    const node = stepper(view);
    const index = PHASES.indexOf(phase);
    node.dataset.phase = phase;
    node.querySelectorAll("li").forEach((li, i) => {
      li.className = i < index ? "done" : i === index ? "current" : "";
      if (i === index) li.setAttribute("aria-current", "step"); else li.removeAttribute("aria-current");
    });
    if (counters) showBudgets(node, counters);
  }

  function showBudgets(node, c) {
    const b = c.budgets;
    const left = (used, limit) => Math.max(0, limit - used) + "/" + limit;
    node.querySelector("[data-role=budgets]").textContent = b
      ? "round " + c.round + " · left: think " + left(c.think_used, b.think) + " · verify " + left(c.verify_used, b.verify) + " · reflect " + left(c.reflect_used, b.reflect)
      : "round " + c.round;
  }

  // Own styles, so the page's stylesheet needs nothing for plan_exec.
  document.head.append(el("style", { "data-from": "phases.js", text: [
    ".phase-stepper { display:flex; flex-wrap:wrap; align-items:center; gap:.8rem; padding:.3rem .7rem; font-size:.85rem; }",
    ".phase-stepper ol.phases { display:flex; gap:.3rem; list-style:none; margin:0; padding:0; }",
    ".phase-stepper li { padding:.1rem .55rem; border-radius:999px; border:1px solid #d0d5dd; color:#667085; }",
    ".phase-stepper li.done { background:#ecfdf3; border-color:#abefc6; color:#067647; }",
    ".phase-stepper li.current { background:#eff8ff; border-color:#2e90fa; color:#175cd3; font-weight:600; }",
    ".phase-stepper .budgets { color:#667085; }",
    ".note { font-size:.85rem; color:#475467; padding:.2rem .7rem; border-left:3px solid #d0d5dd; margin:.3rem 0; }",
    ".note.violation-note, .note.budget-note { border-left-color:#f79009; color:#93370d; }",
    ".reflection-card { border:1px solid #d6bbfb; border-radius:8px; margin:.5rem 0; background:#faf5ff; }",
    ".reflection-card summary { cursor:pointer; padding:.4rem .7rem; display:flex; gap:.8rem; border-left:3px solid #9e77ed; }",
    ".reflection-card pre { white-space:pre-wrap; margin:0; padding:.4rem .7rem; }",
    ".badge.status-gave_up_after_reflections { background:#fef0c7; color:#93370d; }",
  ].join("\n") }));

  const renderers = window.agentkitRenderers = window.agentkitRenderers || {};

  renderers.task_started = (view, ev) => {
    if (ev.data.mode === "plan_exec") showPhase(view, "planning", null);
  };
  renderers.phase_changed = (view, ev) => {
    const d = ev.data;
    showPhase(view, d.phase, d.counters);
    const why = { tool: "", auto: " (automatically, after many steps)", budget: " (think budget used up)", retry: " (verification failed: another round)" }[d.reason] || "";
    note(view, "phase-note", "Phase: " + d.previous + " → " + d.phase + why);
  };
  renderers.task_resumed = (view, ev) => {  // a run that goes on after a process restart
    const d = ev.data;
    if (d.phase) showPhase(view, d.phase, d.counters);
    note(view, "phase-note", "Resumed after a restart" + (d.phase ? " in the " + d.phase + " phase" : "") + ": " + d.steps + " finished steps kept, the spec is not planned again.");
  };
  renderers.phase_violation = (view, ev) => {
    note(view, "violation-note", "Refused in the " + ev.data.phase + " phase: " + ev.data.tool + ". " + (ev.data.hint || ""));
  };
  renderers.budget_exhausted = (view, ev) => {
    const d = ev.data;
    if (d.counters) showBudgets(stepper(view), d.counters);
    const what = { think: "moving on to verification", verify: "the best answer so far goes to verification", reflect: "no more reflections" }[d.budget] || "";
    note(view, "budget-note", "The " + d.budget + " budget (" + d.limit + ") is used up: " + what + ".");
  };
  renderers.reflection = (view, ev) => {
    const d = ev.data;
    if (d.counters) showBudgets(stepper(view), d.counters);
    const body = d.ok ? d.text : "The reflect call failed (" + ((d.error && d.error.error_code) || "error") + "); retrying with the verification errors.";
    view.body.append(el("details", { class: "reflection-card" + (d.ok ? "" : " failed"), open: "" },
      el("summary", {}, el("span", { text: "Reflection " + d.attempt }), el("span", { class: "tool-state", text: "after a failed verification" })),
      el("pre", { class: "result", text: body || "" })));
    view.text = null;
  };
  renderers.task_finished = (view, ev) => {
    const status = ev.data.status;
    if (ev.data.phases) {
      const node = stepper(view);
      showBudgets(node, ev.data.phases);
      node.dataset.final = status;
    }
    if (STATUS_LABELS[status]) {
      const badge = view.root.querySelector("[data-role=status]");
      badge.textContent = STATUS_LABELS[status];
      badge.title = status;
    }
  };
  window.agentkitStatusLabel = (status) => STATUS_LABELS[status] || status;
})();
