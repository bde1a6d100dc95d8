// agentkit chat page: plan_exec rendering. turns.js calls window.agentkitRenderers[type](view, ev)
// after its own renderer for that type (if any); `view` is the task's {root, body, ...}.
// Renders a phase stepper in the task's header (done / current / skipped phases, the spec's phases
// as sub-steps of Build, every phase done once the task completed, budgets in words), phase
// violations and exhausted budgets as notes, reflections as a Markdown card, and the gave-up
// status distinct from failed.
(function () {
  "use strict";
  const PHASES = ["planning", "building", "verification", "delivery"];
  const STATUS_LABELS = { gave_up_after_reflections: "gave up after reflections" };

  const el = window.agentkitEl, note = window.agentkitNote;  // chat.js's helpers

  const LABELS = { planning: "Plan", building: "Build", verification: "Verify", delivery: "Deliver" };

  // The stepper sits in the task's (sticky) header, so it stays in view while the task runs.
  function stepper(view) {
    let node = view.root.querySelector(".phase-stepper");
    if (node) return node;
    const list = el("ol", { class: "phases" });
    for (const phase of PHASES) list.append(el("li", { "data-phase": phase }, el("span", { class: "phase-name", text: LABELS[phase] })));
    node = el("div", { class: "phase-stepper", "data-role": "phases", "aria-label": "plan phases" },
      list, el("span", { class: "budgets", "data-role": "budgets" }));
    view.header.append(node);
    view.phasesSeen = new Set();
    return node;
  }

  // done: passed; current: now; skipped: passed over without running (a run that starts in a
  // later phase, plan_exec.start_phase; a used-up think budget that goes from planning straight
  // to verification); a completed task shows every phase it did not skip done. A phase counts as
  // run once a phase_changed event starts or leaves it (`previous`): task_started only assumes
  // planning, which a run with another start phase never enters.
  function showPhase(view, phase, counters, previous) {
    const node = stepper(view);
    const index = PHASES.indexOf(phase);
    if (previous !== undefined) {
      view.phasesSeen.add(phase);
      if (previous) view.phasesSeen.add(previous);
    }
    node.dataset.phase = phase;
    node.querySelectorAll("ol.phases > li").forEach((li, i) => {
      const state = i < index ? (view.phasesSeen.has(PHASES[i]) ? "done" : "skipped") : i === index ? "current" : "";
      setState(li, state);
    });
    if (counters) showBudgets(node, counters);
  }
  function setState(li, state) {
    li.className = state;
    li.dataset.state = state || "pending";
    li.title = LABELS[li.dataset.phase] ? LABELS[li.dataset.phase] + ": " + (state || "not yet") : state;
    if (state === "current") li.setAttribute("aria-current", "step"); else li.removeAttribute("aria-current");
  }
  function allDone(view) {
    const node = stepper(view);
    node.querySelectorAll("ol.phases > li, ol.sub-steps > li").forEach((li) => {
      if (li.dataset.state !== "skipped") setState(li, "done");
    });
    node.dataset.phase = "done";
  }

  // The spec's own phases are sub-steps of "Build".
  function showSubSteps(view, phases) {
    const building = stepper(view).querySelector("li[data-phase=building]");
    let sub = building.querySelector("ol.sub-steps");
    if (!sub) { sub = el("ol", { class: "sub-steps", "aria-label": "the spec's phases" }); building.append(sub); }
    sub.replaceChildren(...phases.map((p) => el("li", { "data-phase": p.id, title: p.title || p.id, text: p.title || p.id })));
  }

  // Budgets in words; the tooltip says what each one is.
  const BUDGETS = [
    ["think", "think_used", "work step", "work steps", "Work steps: model calls in the building phase before it moves on to verification."],
    ["verify", "verify_used", "check", "checks", "Checks: verification runs (the project's tests and linters)."],
    ["reflect", "reflect_used", "retry", "retries", "Retries: after a failed check, the agent reflects on the errors and tries again."],
  ];
  function showBudgets(node, c) {
    const b = c.budgets;
    const target = node.querySelector("[data-role=budgets]");
    if (!b) { target.textContent = "round " + c.round; return; }
    const parts = BUDGETS.map(([key, used, one, many]) => {
      const left = Math.max(0, b[key] - (c[used] || 0));
      return left + " of " + b[key] + " " + (b[key] === 1 ? one : many) + " left";
    });
    target.textContent = parts.join(" · ");
    target.title = "Round " + c.round + ". " + BUDGETS.map((x) => x[4]).join(" ");
  }

  // Own styles, so the page's stylesheet needs nothing for plan_exec.
  document.head.append(el("style", { "data-from": "phases.js", text: [
    ".phase-stepper { display:flex; flex-wrap:wrap; align-items:center; gap:.3rem .8rem; padding:.3rem 0 0; font-size:.85rem; min-width:0; }",
    ".phase-stepper ol.phases { display:flex; gap:.3rem; list-style:none; margin:0; padding:0; }",
    ".phase-stepper li { padding:.1rem .55rem; border-radius:999px; border:1px solid #d0d5dd; color:#667085; }",
    ".phase-stepper li.done { background:#ecfdf3; border-color:#abefc6; color:#067647; }",
    ".phase-stepper li.current { background:#eff8ff; border-color:#2e90fa; color:#175cd3; font-weight:600; }",
    ".phase-stepper li.done::before { content:'✓ '; }",
    ".phase-stepper li.skipped { border-style:dashed; text-decoration:line-through; }",
    ".phase-stepper ol.sub-steps { display:inline-flex; flex-wrap:wrap; gap:.2rem; list-style:none; margin:0 0 0 .4rem; padding:0; font-size:.8em; }",
    ".phase-stepper ol.sub-steps li { padding:0 .4rem; max-width:10rem; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }",
    ".phase-stepper ol.phases { flex-wrap:wrap; min-width:0; }",
    ".reflection-card .markdown { padding:.4rem .7rem; }",
    "@media (max-width:760px) { .phase-stepper ol.sub-steps { display:none; } .phase-stepper ol.phases { flex-wrap:nowrap; } .phase-stepper li { padding:.05rem .4rem; } }",
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
    showPhase(view, d.phase, d.counters, d.previous || null);
    const why = { tool: "", auto: " (automatically, after many steps)", budget: " (think budget used up)", retry: " (verification failed: another round)" }[d.reason] || "";
    note(view, "phase-note", "Phase: " + d.previous + " → " + d.phase + why);
  };
  renderers.task_resumed = (view, ev) => {  // a run that goes on after a process restart
    const d = ev.data;
    if (d.phase) showPhase(view, d.phase, d.counters, null);
    const why = d.reason ? " (" + d.reason + ")" : "";
    if (d.restarted) { note(view, "phase-note", "Started again after a restart: nothing was done yet" + why + "."); return; }
    const steps = d.steps + " finished step" + (d.steps === 1 ? "" : "s") + " kept";
    note(view, "phase-note", "Resumed after a restart" + (d.phase ? " in the " + d.phase + " phase" : "") + ": " + steps + (d.phase ? ", the spec is not planned again" : "") + why + ".");
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
    const text = el("div", { class: "markdown reflection-text" });
    window.agentkitMarkdown.render(text, body || "");  // the model writes Markdown
    view.body.append(el("details", { class: "reflection-card" + (d.ok ? "" : " failed"), open: "" },
      el("summary", {}, el("span", { text: "Reflection " + d.attempt }), el("span", { class: "tool-state", text: "after a failed verification" })),
      text));
    view.text = null;
  };
  renderers.spec_review_request = (view, ev) => {
    if (view.root.querySelector(".phase-stepper")) showSubSteps(view, ((ev.data.spec || {}).phases) || []);
  };
  renderers.task_finished = (view, ev) => {
    const status = ev.data.status;
    if (ev.data.phases) {
      const node = stepper(view);
      showBudgets(node, ev.data.phases);
      node.dataset.final = status;
    }
    if (status === "completed" && view.root.querySelector(".phase-stepper")) allDone(view);
    if (STATUS_LABELS[status]) {
      const badge = view.root.querySelector("[data-role=status]");
      badge.textContent = STATUS_LABELS[status];
      badge.title = status;
    }
  };
  window.agentkitStatusLabel = (status) => STATUS_LABELS[status] || status;
})();
