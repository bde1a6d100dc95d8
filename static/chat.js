// agentkit chat page: one WebSocket to /ws/chat/, events rendered by type. After its own
// renderer (if any), chat.js calls window.agentkitRenderers[type](view, ev) when some script
// defines one (phases.js does); `view` is the task's {root, header, body, footer, setStatus, el}.
// Other unknown types are ignored. The socket reconnects with backoff and
// resumes each task from the last seq it saw, so a reload or a dropped connection never loses or
// repeats an event. Answers are Markdown (markdown.js), re-rendered per bubble and throttled while
// they stream, so the page's cost does not grow with the number of events on it. The thread and
// the URL live in thread.js, the message box in composer.js, tool card summaries in cards.js.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const messages = $("#messages");
  const box = $("#message");
  const composer = $("#composer");
  const composerError = $("#composer-error");
  const FINISHED = ["completed", "failed", "cancelled", "gave_up_after_reflections", "parked"];
  // States in which nothing runs on the server: no thinking indicator, no running clock.
  const IDLE = ["queued", "awaiting_review", "parked"];
  const COMPOSER_EVENTS = ["spec_review_request", "spec_review_resolved", "task_started", "task_waiting", "task_finished"];
  const STREAM_RENDER_MS = 80;  // a streaming bubble re-renders at most this often
  const THINKING_AFTER_MS = 700;
  const providers = JSON.parse(($("#model-providers") || {}).textContent || "{}");
  const state = { socket: null, backoff: 500, tasks: {}, current: null, pending: [], sent: null };
  window.agentkitRendered = {};  // task id -> seqs rendered, in order (diagnostics and tests)
  window.agentkitRenderers = window.agentkitRenderers || {};  // extension point: type -> fn(ev, view)
  window.agentkitFrameMs = [];  // per event: ms from receipt to the next painted frame (bench)
  // Diagnostics and tests: how often the socket reopened, and a way to drop it on purpose.
  window.agentkitSocket = { opens: 0, drop: () => state.socket && state.socket.close(), inject: (ev) => receive(ev) };
  // thread.js and composer.js add openTask, adopt, showEmpty, modeLabel, composerMode, composerCheck.
  const chat = window.agentkitChat = { state, send, composerFrame: (f) => f };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const c of children) if (c != null) node.append(c);
    return node;
  }
  window.agentkitEl = el;

  // A note line in a task's body (phase, team, recovery notes); text after it starts a new bubble.
  function note(view, cls, text) {
    view.body.append(el("div", { class: "note " + cls, role: "note", text }));
    view.text = null;
  }
  window.agentkitNote = note;

  // ── Markdown bubbles: raw text kept in JS, rendered when dirty ───────────────────────────────
  const dirty = new Set();
  let frameRequested = false;
  function scheduleRender() {
    if (frameRequested) return;
    frameRequested = true;
    requestAnimationFrame(flushRenders);
  }
  function flushRenders(force) {
    frameRequested = false;
    const now = performance.now();
    for (const bubble of dirty) {
      if (force !== true && bubble.streaming && now - bubble.renderedAt < STREAM_RENDER_MS) continue;
      window.agentkitMarkdown.render(bubble.node, bubble.raw);
      bubble.renderedAt = now;
      dirty.delete(bubble);
    }
    if (dirty.size) setTimeout(scheduleRender, STREAM_RENDER_MS);
  }
  function newBubble(view, cls) {
    const bubble = { node: el("div", { class: "bubble markdown " + cls }), raw: "", renderedAt: 0, streaming: false };
    view.body.append(bubble.node);
    return bubble;
  }
  function setBubble(bubble, text, streaming) {
    bubble.raw = text;
    bubble.streaming = streaming;
    dirty.add(bubble);
    if (!streaming) { window.agentkitMarkdown.render(bubble.node, bubble.raw); bubble.renderedAt = performance.now(); dirty.delete(bubble); }
    else scheduleRender();
  }

  // ── one task's view ──────────────────────────────────────────────────────────────────────────
  function taskView(taskId) {
    let view = state.tasks[taskId];
    if (view) return view;
    const root = el("article", { class: "task", "data-task-id": String(taskId), "aria-label": "Task " + taskId });
    const header = el("header", { class: "task-header" },
      el("div", { class: "task-head-row" },
        el("h3", { class: "task-title", text: "Task #" + taskId }),
        el("span", { class: "badge status-queued", "data-role": "status", text: "queued" }),
        el("span", { class: "task-actions" },
          el("button", { class: "stop", type: "button", "data-role": "stop", text: "Stop", "aria-label": "Stop task " + taskId }),
          el("button", { class: "secondary", type: "button", "data-role": "changes", text: "Changes", hidden: "" }),
          el("button", { class: "link danger", type: "button", "data-role": "delete", text: "Delete", hidden: "", "aria-label": "Delete task " + taskId }))),
      el("div", { class: "task-meta", "data-role": "meta" },
        el("span", { "data-role": "model", title: "model alias (provider)" }),
        el("span", { "data-role": "steps" }),
        el("span", { "data-role": "elapsed" }),
        el("span", { "data-role": "tokens" }),
        el("span", { "data-role": "cache" }),
        el("span", { "data-role": "cost" })));
    header.querySelector("[data-role=stop]").addEventListener("click", (e) => { e.target.disabled = true; e.target.textContent = "Stopping…"; send({ type: "cancel", task_id: taskId }); });
    header.querySelector("[data-role=delete]").addEventListener("click", () => deleteTask(taskId));
    header.querySelector("[data-role=changes]").addEventListener("click", () => window.agentkitChanges && window.agentkitChanges.toggle(view));
    const body = el("div", { class: "task-body" });
    const thinking = el("div", { class: "thinking", "data-role": "thinking", role: "status", hidden: "", text: "thinking…" });
    const footer = el("footer", { class: "task-footer", "data-role": "usage" });
    root.append(header, body, thinking, footer);
    view = state.tasks[taskId] = {
      id: taskId, root, header, body, thinking, footer, lastSeq: 0, text: null, cards: {}, streamedSteps: new Set(),
      status: "queued", startedAt: null, finishedAt: null, lastEventAt: 0, editedFiles: 0,
      setStatus: (s) => setStatus(view, s), el,
    };
    return view;
  }

  // The pane shows one conversation (thread.js): its turns in the order they were created.
  // Tasks of other conversations keep their (detached) views up to date, so switching back costs
  // nothing.
  function attach(view) {
    if (view.root.isConnected) return;
    const later = [...messages.querySelectorAll(":scope > article.task")].find((a) => Number(a.dataset.taskId) > view.id);
    messages.insertBefore(view.root, later || messages.querySelector(":scope > .pending-task"));
  }

  function meta(view, role, text) { view.header.querySelector("[data-role=" + role + "]").textContent = text; }

  function setStatus(view, status) {
    view.status = status;
    view.root.dataset.status = status;
    const badge = view.root.querySelector("[data-role=status]");
    badge.textContent = status === "queued" && view.waitingFor ? "waiting for task #" + view.waitingFor
      : (window.agentkitStatusLabel || String)(status);
    badge.className = "badge status-" + status;
    const finished = FINISHED.includes(status);
    const stop = view.root.querySelector("[data-role=stop]");
    stop.hidden = finished;
    if (!stop.disabled) stop.textContent = status === "queued" ? "Cancel" : "Stop";
    if (finished || IDLE.includes(status)) view.thinking.hidden = true;
    // A finished turn's tool cards fold away: the thread reads as questions and answers.
    if (finished) view.body.querySelectorAll(":scope > details.tool-card[open]").forEach((d) => { d.open = false; });
    view.root.querySelector("[data-role=delete]").hidden = !finished || view.owner === false;
    view.root.querySelector("[data-role=changes]").hidden = !(finished && view.editedFiles);
  }

  function showUsage(view, usage, cost) {
    if (!usage) return;
    const input = usage.input_tokens || 0;
    const cached = usage.cache_read_tokens || 0;
    meta(view, "tokens", "tokens " + input + " in · " + (usage.output_tokens || 0) + " out");
    meta(view, "cache", "cache " + (input ? Math.round((100 * cached) / input) : 0) + "%");
    if (typeof cost === "number") meta(view, "cost", "$" + cost.toFixed(4));
    view.footer.textContent = "tokens in " + input + " (cached " + cached + ") · out " + (usage.output_tokens || 0) + (typeof cost === "number" ? " · $" + cost.toFixed(4) : "");
  }

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
      // Another run changes this workspace now (one writer per workspace; the turn before in
      // this conversation, or another conversation's): queued until it ends, cancellable.
      view.waitingFor = ev.data.waiting_for || null;
      setStatus(view, "queued");
      if (ev.data.goal && !view.goalShown) { view.body.append(el("div", { class: "bubble user", text: ev.data.goal })); view.goalShown = true; }
      const cancel = el("button", { type: "button", class: "stop", "data-role": "cancel-queued", text: "Cancel", "aria-label": "Cancel queued task " + view.id });
      cancel.addEventListener("click", () => { cancel.disabled = true; cancel.textContent = "Cancelling…"; send({ type: "cancel", task_id: view.id }); });
      const mine = ev.data.waiting_for && state.tasks[ev.data.waiting_for] && state.tasks[ev.data.waiting_for].root.isConnected;
      view.body.append(el("div", { class: "bubble notice waiting", role: "status", "data-role": "queued-notice" },
        el("span", { text: "Queued: " + (mine ? "starts when the turn above (task #" + ev.data.waiting_for + ") ends." : (ev.data.reason || "waiting for the workspace") + "; starts when it ends.") + " " }), cancel));
      state.maxTaskId = Math.max(state.maxTaskId || 0, ev.task_id);
    },
    task_started(view, ev) {
      view.waitingFor = null;
      view.body.querySelectorAll("[data-role=cancel-queued]").forEach((b) => b.remove());
      setStatus(view, "running");
      view.startedAt = Date.parse(ev.ts) || Date.now();
      if (ev.data.goal && !view.goalShown) { view.body.append(el("div", { class: "bubble user", text: ev.data.goal })); view.goalShown = true; }
      if (ev.data.mode) view.root.querySelector(".task-title").textContent = "Task #" + ev.task_id + " · " + chat.modeLabel(ev.data.mode) + (ev.data.skill ? " · " + ev.data.skill : "");
      if (ev.data.model) meta(view, "model", ev.data.model + (providers[ev.data.model] ? " (" + providers[ev.data.model] + ")" : ""));
      conversations.started(ev);  // issue 13
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
        if (view.text) { setBubble(view.text, view.text.raw, false); view.text = null; }  // the step's answer goes below
        const text = el("div", { class: "thinking-text" });
        const card = el("details", { class: "thinking-card", "data-step": String(ev.data.step) },
          el("summary", {}, el("span", { text: "Thinking" })), text);
        view.body.append(card);
        view.reasoning = { key, card, text };
      }
      view.reasoning.text.textContent += ev.data.text || "";
    },
    tool_call(view, ev) {
      if (view.text) { setBubble(view.text, view.text.raw, false); view.text = null; }  // text after a tool call starts a new bubble
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
      if (view.text) { setBubble(view.text, view.text.raw, false); view.text = null; }
      view.body.append(el("div", { class: "bubble error", role: "alert", text: (e.error_code ? "[" + e.error_code + "] " : "") + (e.message || "error") }));
    },
    task_finished(view, ev) {
      if (view.text) { setBubble(view.text, view.text.raw, false); view.text = null; }
      const status = ev.data.status || "completed";
      view.finishedAt = Date.parse(ev.ts) || Date.now();
      setStatus(view, status);
      if (typeof ev.data.steps === "number") meta(view, "steps", "step " + ev.data.steps);
      showUsage(view, ev.data.usage || {}, ev.data.cost);
      conversations.usageFooter(view, ev);  // issue 13: cache writes, hit rate, conversation totals
      tickClock(view);
      if (status === "cancelled") {
        const err = ev.data.error || {};
        const text = err.error_code === "interrupted" ? "Stopped: " + (err.message || "the run was interrupted.") : "Cancelled by the user.";
        view.body.append(el("div", { class: "bubble notice", role: "status", text }));
      }
      refreshHistory();
    },
  };

  function receive(ev) {
    const t0 = performance.now();
    onEvent(ev);
    requestAnimationFrame(() => setTimeout(() => { window.agentkitFrameMs.push(performance.now() - t0); if (window.agentkitFrameMs.length > 5000) window.agentkitFrameMs.splice(0, 1000); }, 0));
  }

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

  function onEvent(ev) {
    if (ev.type === "error" && (ev.seq == null)) { protocolError(ev); return; }
    if (ev.task_id == null || typeof ev.seq !== "number") return;
    const view = taskView(ev.task_id);
    if (ev.seq <= view.lastSeq) return;  // already shown
    if (state.awaitingNew && ev.task_id > (state.maxTaskId || 0) && (ev.type === "task_started" || ev.type === "task_waiting")) chat.adopt(view, ev);
    view.lastSeq = ev.seq;
    view.lastEventAt = Date.now();
    view.thinking.hidden = true;
    (window.agentkitRendered[ev.task_id] = window.agentkitRendered[ev.task_id] || []).push(ev.seq);
    if (typeof ev.data.step === "number" && ev.data.step > 0) meta(view, "steps", "step " + ev.data.step);
    if (ev.type !== "task_finished" && ev.data.usage) showUsage(view, ev.data.usage, ev.data.cost);
    const lane = enterLane(view, ev);
    for (const handler of [render[ev.type], window.agentkitRenderers[ev.type]]) {
      if (handler) try { handler(view, ev); } catch (err) { console.error(err); }
    }
    leaveLane(view, lane, ev);
    if (COMPOSER_EVENTS.includes(ev.type)) { if (chat.composerMode) chat.composerMode(); refreshHistorySoon(); }
    if (ev.type === "task_started") state.forceScroll = true;
    scheduleScroll();
  }


  // Follow the stream once per frame (not per event: reading the layout per event costs a
  // whole-pane layout each time), and only when the reader is at the bottom already.
  let scrollQueued = false;
  let wasAtBottom = true;
  messages.addEventListener("scroll", () => { wasAtBottom = messages.scrollHeight - messages.scrollTop - messages.clientHeight < 200; }, { passive: true });
  function scheduleScroll() {
    if (scrollQueued) return;
    scrollQueued = true;
    requestAnimationFrame(() => {
      scrollQueued = false;
      if (wasAtBottom || state.forceScroll) messages.scrollTop = messages.scrollHeight;
      state.forceScroll = false;
    });
  }

  // Errors that answer a frame (not a task event): a rejected message goes back into the box.
  function protocolError(ev) {
    const e = (ev.data && ev.data.error_struct) || {};
    const text = "[" + (e.error_code || "error") + "] " + (e.message || "");
    if (state.sent && (ev.task_id == null)) {
      if (!box.value.trim()) { box.value = state.sent.text; chat.composerCheck(); }
      state.sent = null;
      state.awaitingNew = false;
      messages.querySelectorAll(":scope > .pending-task").forEach((n) => n.remove());
      showComposerError(text);
      return;
    }
    messages.append(el("div", { class: "bubble error", role: "alert", text }));
  }

  function showComposerError(text) { composerError.textContent = text; composer.classList.toggle("has-error", Boolean(text)); }

  // ── conversations (issue 13) ── follow-ups continue the conversation of the task on screen
  // ("conversation" in the user_message frame); "New conversation" starts a fresh one; the
  // sidebar groups tasks by conversation; the footer shows cache reads/writes, the hit rate and
  // the conversation's totals.
  const conversations = {
    current: null,          // conversation id that new messages continue; null = start a new one
    byTask: {},             // task id -> conversation id
    started(ev) { if (ev.data && ev.data.conversation) this.byTask[ev.task_id] = ev.data.conversation; },
    decorate(frame) { if (this.current) frame.conversation = this.current; return frame; },
    startNew() {
      chat.navigation += 1;  // an open still loading is dropped
      state.chose = true;  // the sidebar's first load opens nothing now
      this.current = null;
      for (const node of [...messages.children]) node.remove();
      state.current = null;
      history.pushState(null, "", "/");
      chat.showEmpty();
      box.focus();
      refreshHistory();
    },
    percent(read, total) { return total ? Math.round((100 * read) / total) + "%" : "–"; },
    usageFooter(view, ev) {
      const u = ev.data.usage || {};
      view.footer.textContent += " · cache read " + (u.cache_read_tokens || 0) + ", written " + (u.cache_write_tokens || 0) + ", hit " + this.percent(u.cache_read_tokens || 0, u.input_tokens || 0);
      const id = this.byTask[ev.task_id];
      if (!id) return;
      fetch("/api/conversations/" + id, { credentials: "same-origin" }).then((r) => r.ok ? r.json() : null).then((c) => {
        if (!c) return;
        const total = el("span", { class: "conversation-usage", "data-role": "conversation-usage",
          text: " · conversation: " + c.tasks.length + " turn(s), tokens in " + c.usage.input_tokens + ", hit " + this.percent(c.usage.cache_read_tokens, c.usage.input_tokens) + " · $" + (c.usage.cost || 0).toFixed(4) });
        const old = view.footer.querySelector("[data-role=conversation-usage]");
        if (old) old.replaceWith(total); else view.footer.append(total);
      }).catch(() => {});
    },
  };
  window.agentkitChat.conversations = conversations;
  window.agentkitChat.composerFrame = (frame) => conversations.decorate(frame);
  render.compression = (view, ev) => {  // the context was compressed (a summary replaced the middle)
    const d = ev.data || {};
    if (view.text) { setBubble(view.text, view.text.raw, false); view.text = null; }
    view.body.append(el("div", { class: "compression-note", role: "note",
      text: "Context compressed: " + d.tokens_before + " → " + d.tokens_after + " tokens (summary by " + d.summarized_by + ")" }));
  };
  (function addNewConversationButton() {
    const button = el("button", { type: "button", id: "new-conversation", class: "link", text: "New conversation" });
    button.addEventListener("click", () => conversations.startNew());
    $(".composer-meta").append(button);
  })();

  // ── clock: elapsed time and the "thinking…" state between events ─────────────────────────────
  function tickClock(view) {
    if (!view.startedAt) return;
    const end = view.finishedAt || Date.now();
    const s = Math.max(0, Math.round((end - view.startedAt) / 1000));
    meta(view, "elapsed", s < 60 ? s + " s" : Math.floor(s / 60) + " min " + (s % 60) + " s");
  }
  setInterval(() => {
    const now = Date.now();
    for (const view of Object.values(state.tasks)) {
      if (FINISHED.includes(view.status) || IDLE.includes(view.status) || !view.lastEventAt) continue;
      tickClock(view);
      view.thinking.hidden = now - view.lastEventAt < THINKING_AFTER_MS;
    }
  }, 500);

  // ── socket ───────────────────────────────────────────────────────────────────────────────────
  function send(frame) {
    if (state.socket && state.socket.readyState === WebSocket.OPEN) { state.socket.send(JSON.stringify(frame)); return true; }
    state.pending.push(frame);
    return false;
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    // frames=batch: the server sends the events of one delivery as one {"type": "batch"} frame.
    const socket = new WebSocket(proto + "//" + location.host + "/ws/chat/?frames=batch");
    state.socket = socket;
    socket.addEventListener("open", () => {
      state.backoff = 500;
      window.agentkitSocket.opens += 1;
      document.body.dataset.socket = "open";
      if (composerError.dataset.offline) { showComposerError(""); delete composerError.dataset.offline; }
      for (const [id, view] of Object.entries(state.tasks)) send({ type: "resume", task_id: Number(id), after_seq: view.lastSeq });
      const queued = state.pending.splice(0);
      for (const frame of queued) socket.send(JSON.stringify(frame));
    });
    socket.addEventListener("message", (msg) => {
      let frame;
      try { frame = JSON.parse(msg.data); } catch (err) { console.error(err); return; }
      for (const ev of frame.type === "batch" && Array.isArray(frame.events) ? frame.events : [frame]) {
        try { receive(ev); } catch (err) { console.error(err); }
      }
    });
    socket.addEventListener("close", () => {
      document.body.dataset.socket = "closed";
      setTimeout(connect, state.backoff);
      state.backoff = Math.min(state.backoff * 2, 10000);
    });
  }

  // ── history (sidebar.js renders the list; these are the hooks it calls) ──────────────────────
  function refreshHistory() { if (window.agentkitSidebar) window.agentkitSidebar.refresh(); }
  let historyTimer = null;  // a state change refreshes the sidebar's badges, at most every 300 ms
  function refreshHistorySoon() { clearTimeout(historyTimer); historyTimer = setTimeout(refreshHistory, 300); }

  async function deleteTask(taskId) {
    if (!confirm("Delete task #" + taskId + " and its history? This cannot be undone.")) return;
    const resp = await fetch("/api/tasks/" + taskId, { method: "DELETE", credentials: "same-origin", headers: { "X-CSRFToken": csrfToken() } });
    if (resp.ok) {
      const view = state.tasks[taskId];
      if (view) { view.root.remove(); delete state.tasks[taskId]; }
      refreshHistory();
    } else {
      const body = await resp.json().catch(() => ({}));
      alert("Could not delete: " + ((body.error && body.error.message) || resp.status));
    }
  }
  function csrfToken() { const m = /(?:^|; )csrftoken=([^;]+)/.exec(document.cookie); return m ? decodeURIComponent(m[1]) : ""; }
  window.agentkitCsrf = csrfToken;

  window.agentkitOpenTask = (taskId) => chat.openTask(taskId);  // issue 14: errors.js opens a retry
  Object.assign(chat, { el, taskView, attach, conversations, refreshHistory, scheduleScroll, showComposerError, FINISHED, connect });
  // thread.js, loaded next, opens what the URL names and connects; composer.js comes after it.
})();
