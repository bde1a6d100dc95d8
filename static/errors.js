// agentkit chat page: failure handling (issue 14). turns.js calls window.agentkitRenderers[type](view, ev)
// after its own renderer for that type; `view` is the task's {root, body, ...}.
// Renders the Recovery tier as notes (recovery_started / recovery_finished) and, when a task ends
// failed, an error card: message, suggestions, the salvaged diff, the failure's own text for the
// task's owner (fetched from the JSON API, which gives it only to the owner), and a Retry button
// when the error is retryable (POST /api/tasks/<id>/retry: a new task, same goal, linked).
(function () {
  "use strict";

  const el = window.agentkitEl, note = window.agentkitNote;  // chat.js's helpers
  const csrfToken = window.agentkitCsrf;

  document.head.append(el("style", { "data-from": "errors.js", text: [
    ".error-card { border:1px solid #fda29b; border-radius:8px; margin:.5rem 0; background:#fef3f2; padding:.5rem .7rem; }",
    ".error-card.bubble.error { color:inherit; white-space:normal; }",
    ".error-card h3 { margin:0 0 .3rem; font-size:.95rem; color:#b42318; }",
    ".error-card ul { margin:.2rem 0 .4rem 1.1rem; padding:0; }",
    ".error-card details { margin:.3rem 0; }",
    ".error-card pre { white-space:pre-wrap; max-height:24rem; overflow:auto; background:#fff; padding:.4rem; margin:.2rem 0; }",
    ".error-card .retry { margin-top:.3rem; }",
    ".note.recovery-note { border-left-color:#9e77ed; color:#53389e; }",
  ].join("\n") }));

  async function retry(taskId, button, card) {
    button.disabled = true;
    try {
      const resp = await fetch("/api/tasks/" + taskId + "/retry", {
        method: "POST", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() },
      });
      const data = await resp.json();
      if (!resp.ok) {
        card.append(el("p", { class: "retry-error", role: "alert", text: (data.error && data.error.message) || "Retry failed." }));
        button.disabled = false;
        return;
      }
      card.append(el("p", { class: "retry-started", text: "Retrying as task #" + data.id + "." }));
      if (window.agentkitOpenTask) window.agentkitOpenTask(data.id);
    } catch (err) {
      button.disabled = false;
    }
  }

  async function ownerDetails(taskId, card) {
    try {
      const resp = await fetch("/api/tasks/" + taskId, { credentials: "same-origin" });
      if (!resp.ok) return;
      const data = await resp.json();
      if (data.original_error) {
        card.append(el("details", { class: "original-error" },
          el("summary", { text: "Details (only you see these)" }), el("pre", { text: data.original_error })));
      }
    } catch (err) { /* offline: the card stays as it is */ }
  }

  function errorCard(view, ev) {
    const e = ev.data.error || {};
    const card = el("section", { class: "error-card", "data-role": "error-card", "data-error-code": e.error_code || "" },
      el("h3", { text: "The task failed · " + (e.error_code || "error") }),
      el("p", { class: "error-message", text: e.message || "" }));
    if (e.suggestions && e.suggestions.length) {
      card.append(el("div", { class: "label", text: "What you can do" }),
        el("ul", { class: "suggestions" }, ...e.suggestions.map((s) => el("li", { text: s }))));
    }
    const salvage = ev.data.salvage;
    if (salvage && salvage.diff) {
      const what = salvage.source === "git" ? "Uncommitted changes in the workspace" : "Files the task edited";
      card.append(el("details", { class: "salvage", open: "" },
        el("summary", { text: what + ": " + (salvage.files || []).join(", ") }),
        el("pre", { class: "salvage-diff", text: salvage.diff })));
    }
    if (e.retryable) {
      const button = el("button", { type: "button", class: "retry", text: "Retry" });
      button.addEventListener("click", () => retry(ev.task_id, button, card));
      card.append(button);
    }
    // The card takes the place of the plain fatal-error line turns.js showed for the same error.
    const plain = [...view.body.querySelectorAll(".bubble.error:not(.error-card)")].pop();
    if (plain && e.error_code && plain.textContent.includes("[" + e.error_code + "]")) plain.remove();
    card.classList.add("bubble", "error");
    view.body.append(card);
    view.text = null;
    ownerDetails(ev.task_id, card);
  }

  const renderers = window.agentkitRenderers = window.agentkitRenderers || {};
  const chained = (type, fn) => {
    const before = renderers[type];
    renderers[type] = (view, ev) => { if (before) before(view, ev); fn(view, ev); };
  };

  chained("recovery_started", (view, ev) => {
    const d = ev.data, e = d.error_struct || {};
    note(view, "recovery-note", "Recovery " + d.attempt + "/" + d.max_retries + ": the attempt failed ([" + (e.error_code || "error") + "] " + (e.message || "") + "); trying again" + (d.reflection && d.reflection.ok ? " after a reflection." : "."));
  });
  chained("recovery_finished", (view, ev) => {
    note(view, "recovery-note", ev.data.ok ? "Recovery succeeded." : "Recovery did not fix it (" + ev.data.status + ").");
  });
  chained("task_finished", (view, ev) => {
    if (ev.data.error && ev.data.status !== "completed" && ev.data.status !== "cancelled") errorCard(view, ev);
  });
})();
