// The chat's turn rendering: each event type's renderer draws into its task's view (chat.js) —
// the goal, streamed answers, the model's reasoning, tool cards, verification cards, errors, the
// end with its usage. After its own renderer (if any), `chat.renderEvent` calls
// window.agentkitRenderers[type](view, ev) when some script defines one (phases.js, specs.js,
// team.js do); other unknown types are ignored. Team runs stream each phase into its own lane.
(function () {
  "use strict";
  const chat = window.agentkitChat;
  const { state, el, newBubble, setBubble, closeBubble, meta, setStatus, showUsage, tickClock, providers } = chat;

  function diffView(diff) {
    const pre = el("pre", { class: "diff" });
    for (const line of diff.split("\n")) {
      const cls = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "";
      pre.append(el("span", { class: cls, text: line + "\n" }));
    }
    return pre;
  }
  window.agentkitDiffView = diffView;

  function toolOutput(text) {
    // Tool output is shown as text in a <pre>; Markdown only when it is long prose is not worth the risk.
    return el("pre", { class: "result", text });
  }

  const render = {
    task_waiting(view, ev) {
      // The conversation's earlier turn runs (one run per conversation), or another run changes
      // this workspace (one writer per workspace): queued until it ends, cancellable.
      view.waitingFor = ev.data.waiting_for || null;
      view.waitedFor = view.waitingFor || view.waitedFor;
      view.noticed = true;  // the notice below has the Cancel button (the header's hides)
      if (ev.data.mode) view.mode = ev.data.mode;
      if (ev.data.mode) view.root.querySelector(".task-title").textContent = "Task #" + ev.task_id + " · " + chat.modeLabel(ev.data.mode);
      setStatus(view, "queued");
      if (ev.data.goal && !view.goalShown) { view.body.append(el("div", { class: "bubble user", text: ev.data.goal })); view.goalShown = true; }
      // One notice, one Cancel: a later task_waiting (whom it waits for changed) replaces it.
      view.body.querySelectorAll("[data-role=queued-notice]").forEach((n) => n.remove());
      const cancel = el("button", { type: "button", class: "stop", "data-role": "cancel-queued", text: "Cancel", "aria-label": "Cancel queued task " + view.id });
      cancel.addEventListener("click", () => { cancel.disabled = true; cancel.textContent = "Cancelling…"; chat.send({ type: "cancel", task_id: view.id }); });
      const mine = ev.data.waiting_for && state.tasks[ev.data.waiting_for] && state.tasks[ev.data.waiting_for].root.isConnected;
      // Waiting for a free worker (executor rq: apps/tasks/dispatch/queued.py), with the jobs ahead of it.
      const worker = !ev.data.waiting_for && ev.data.queue;
      if (worker) view.waitedWorker = true;
      const ahead = ev.data.ahead ? " (" + ev.data.ahead + (ev.data.ahead === 1 ? " task" : " tasks") + " ahead)" : "";
      const text = worker ? (ev.data.reason || "waiting for a free worker") + ahead + "; starts when one is free."
        : mine ? "starts when the turn above (task #" + ev.data.waiting_for + ") ends."
        : (ev.data.reason || "waiting for the workspace") + "; starts when it ends.";
      view.body.append(el("div", { class: "bubble notice waiting", role: "status", "data-role": "queued-notice" },
        el("span", { text: "Queued: " + text + " " }), cancel));
      state.maxTaskId = Math.max(state.maxTaskId || 0, ev.task_id);
    },
    task_started(view, ev) {
      view.waitingFor = null;
      view.noticed = false;
      view.body.querySelectorAll("[data-role=cancel-queued]").forEach((b) => b.remove());
      // the wait is over: the notice says what happened, not what is going on
      view.body.querySelectorAll("[data-role=queued-notice]").forEach((n) => {
        n.textContent = view.waitedFor ? "Waited for task #" + view.waitedFor + " to end."
          : view.waitedWorker ? "Waited for a free worker." : "Waited for its turn.";
        n.removeAttribute("role");
      });
      setStatus(view, "running");
      view.startedAt = Date.parse(ev.ts) || Date.now();
      if (ev.data.goal && !view.goalShown) { view.body.append(el("div", { class: "bubble user", text: ev.data.goal })); view.goalShown = true; }
      if (ev.data.mode) view.mode = ev.data.mode;
      if (ev.data.mode) view.root.querySelector(".task-title").textContent = "Task #" + ev.task_id + " · " + chat.modeLabel(ev.data.mode) + (ev.data.skill ? " · " + ev.data.skill : "");
      if (ev.data.model) meta(view, "model", ev.data.model + (providers[ev.data.model] ? " (" + providers[ev.data.model] + ")" : ""));
      chat.conversations.started(ev);  // issue 13
      state.maxTaskId = Math.max(state.maxTaskId || 0, ev.task_id);
    },
    token(view, ev) {
      if (ev.data.restart) {  // the model call is being retried: drop this step's text so far
        if (view.text) setBubble(view.text, "", false);
        return;
      }
      view.streamedSteps.add(ev.data.step);
      if (!view.text) view.text = newBubble(view, "assistant");
      setBubble(view.text, view.text.raw + (ev.data.text || ""), true);
    },
    // The model's reasoning (Anthropic thinking, reasoning_content): one collapsed "Thinking"
    // section per step (per phase in team runs), filled as its batched `reasoning` events arrive.
    reasoning(view, ev) {
      const key = (ev.data.phase_id || "") + ":" + ev.data.step;
      if (ev.data.restart) {  // the model call is being retried: drop this step's reasoning so far
        if (view.reasoning && view.reasoning.key === key) view.reasoning.text.textContent = "";
        return;
      }
      if (!view.reasoning || view.reasoning.key !== key) {
        closeBubble(view);  // the step's answer goes below
        const text = el("div", { class: "thinking-text" });
        const card = el("details", { class: "thinking-card", "data-step": String(ev.data.step) },
          el("summary", {}, el("span", { text: "Thinking" })), text);
        view.body.append(card);
        view.reasoning = { key, card, text };
      }
      view.reasoning.text.textContent += ev.data.text || "";
    },
    tool_call(view, ev) {
      closeBubble(view);  // text after a tool call starts a new bubble
      const args = JSON.stringify(ev.data.arguments || {}, null, 2);
      const what = window.agentkitCards ? window.agentkitCards.call(ev.data.name, ev.data.arguments) : "";
      const card = el("details", { class: "tool-card", "data-tool": ev.data.name || "", open: "" },
        el("summary", {}, el("span", { class: "tool-name", text: ev.data.name || "tool" }),
          el("span", { class: "tool-what", "data-role": "tool-what", text: what }),
          el("span", { class: "tool-state", text: "running…" })),
        el("div", { class: "tool-section" }, el("div", { class: "label", text: "arguments" }), el("pre", { class: "args", text: args })));
      view.body.append(card);
      card.toolArgs = ev.data.arguments || {};
      view.cards[ev.data.call_id || ev.data.id || ev.seq] = card;
    },
    tool_result(view, ev) {
      const card = view.cards[ev.data.call_id || ev.data.id] || Object.values(view.cards).pop();
      if (!card) return;
      const ok = ev.data.ok !== false;
      card.classList.add(ok ? "ok" : "failed");
      const told = window.agentkitCards ? window.agentkitCards.result(ev.data.name, card.toolArgs, ev.data) : { state: ok ? "done" : "error" };
      card.querySelector(".tool-state").textContent = told.state;
      if (told.tail) card.querySelector("summary").after(el("div", { class: "tool-section" }, el("div", { class: "label", text: "last lines" }), el("pre", { class: "tail", "data-role": "tail", text: told.tail })));
      const section = el("div", { class: "tool-section" }, el("div", { class: "label", text: ok ? "result" : "error" }));
      const extra = ev.data.data || {};
      if (extra.diff) {
        section.append(diffView(extra.diff));
        view.editedFiles += 1;
      }
      section.append(toolOutput(ok ? (ev.data.output || "") : ((ev.data.error || "") + (ev.data.output ? "\n" + ev.data.output : ""))));
      card.append(section);
    },
    verification_result(view, ev) {
      const d = ev.data;
      const card = el("details", { class: "verify-card " + (d.passed ? "ok" : "failed") },
        el("summary", {}, el("span", { text: "Verification " + (d.passed ? "passed" : "failed") }), el("span", { class: "tool-state", text: (d.commands || []).join(" · ") })),
        el("pre", { class: "result", text: [(d.errors || []).join("\n"), d.log || ""].filter(Boolean).join("\n\n") }));
      view.body.append(card);
      view.text = null;
    },
    final_answer(view, ev) {
      // Shown already when its step streamed tokens; otherwise (no streaming) show it now.
      if (!view.streamedSteps.has(ev.data.step) && ev.data.text) {
        if (!view.text) view.text = newBubble(view, "assistant");
        setBubble(view.text, ev.data.text, false);
      } else if (view.text) setBubble(view.text, view.text.raw, false);
      view.text = null;
    },
    error(view, ev) {
      const e = (ev.data && ev.data.error_struct) || {};
      closeBubble(view);
      view.body.append(el("div", { class: "bubble error", role: "alert", text: (e.error_code ? "[" + e.error_code + "] " : "") + (e.message || "error") }));
    },
    task_finished(view, ev) {
      closeBubble(view);
      const status = ev.data.status || "completed";
      view.finishedAt = Date.parse(ev.ts) || Date.now();
      setStatus(view, status);
      if (typeof ev.data.steps === "number") meta(view, "steps", "step " + ev.data.steps);
      showUsage(view, ev.data.usage || {}, ev.data.cost);
      chat.conversations.usageFooter(view, ev);  // issue 13: cache writes, hit rate, conversation totals
      tickClock(view);
      if (status === "cancelled") {
        const err = ev.data.error || {};
        const text = err.error_code === "interrupted" ? "Stopped: " + (err.message || "the run was interrupted.") : "Cancelled by the user.";
        view.body.append(el("div", { class: "bubble notice", role: "status", text }));
      }
      // The outcome (verified | unverified | no_changes | an error code): a completed run that
      // changed nothing, or changed files and checked nothing, says so in plain words.
      const outcomeText = { no_changes: "Finished without changing anything.", unverified: "Changed files without running a check." }[ev.data.outcome];
      if (status === "completed" && outcomeText) view.body.append(el("div", { class: "bubble notice outcome-" + ev.data.outcome, role: "status", text: outcomeText }));
      chat.refreshHistory();
    },
  };
  render.compression = (view, ev) => {  // the context was compressed (a summary replaced the middle)
    const d = ev.data || {};
    closeBubble(view);
    view.body.append(el("div", { class: "compression-note", role: "note",
      text: "Context compressed: " + d.tokens_before + " → " + d.tokens_after + " tokens (summary by " + d.summarized_by + ")" }));
  };

  // team_collab runs phases concurrently, and each phase's events carry its `phase_id`: each
  // phase streams into its own bubbles (its own "lane": current bubble and streamed steps, as
  // step numbers restart per phase), so two experts' tokens never share a bubble.
  function enterLane(view, ev) {
    const id = ev.data && ev.data.phase_id;
    if (id == null || ev.type === "phase_started") return null;
    view.lanes = view.lanes || {};
    const lane = view.lanes[id] || (view.lanes[id] = { text: null, streamedSteps: new Set(), reasoning: null });
    lane.outer = { text: view.text, streamedSteps: view.streamedSteps, reasoning: view.reasoning };
    view.text = lane.text;
    view.streamedSteps = lane.streamedSteps;
    view.reasoning = lane.reasoning;
    return lane;
  }
  function leaveLane(view, lane, ev) {
    if (lane) {
      lane.text = view.text;
      lane.reasoning = view.reasoning;
      view.text = lane.outer.text;
      view.streamedSteps = lane.outer.streamedSteps;
      view.reasoning = lane.outer.reasoning;
    }
    const ended = ev.type === "task_finished" ? Object.values(view.lanes || {})
      : lane && (ev.type === "phase_completed" || ev.type === "phase_failed") ? [lane] : [];
    for (const done of ended) {  // a finished phase's last bubble stops streaming
      if (done.text) { setBubble(done.text, done.text.raw, false); done.text = null; }
    }
  }

  // One event into its task's view: its renderer, then the extension's, inside its lane.
  function renderEvent(view, ev) {
    const lane = enterLane(view, ev);
    for (const handler of [render[ev.type], window.agentkitRenderers[ev.type]]) {
      if (handler) try { handler(view, ev); } catch (err) { console.error(err); }
    }
    leaveLane(view, lane, ev);
  }

  Object.assign(chat, { renderEvent });
})();
