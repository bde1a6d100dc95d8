// agentkit chat page, its core: the page's state and one task's view (header, status, usage,
// clock, Markdown bubbles), shared by the chat's other scripts through window.agentkitChat:
// turns.js renders events by type, socket.js holds the WebSocket (replay from the last seq seen,
// reconnects), thread.js the thread, the conversation and the URL, composer.js the message box,
// cards.js the tool card summaries. Answers are Markdown (markdown.js), re-rendered per bubble and
// throttled while they stream, so the page's cost does not grow with the number of events on it.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const messages = $("#messages");
  const composer = $("#composer");
  const composerError = $("#composer-error");
  const FINISHED = ["completed", "failed", "cancelled", "gave_up_after_reflections", "parked"];
  // States in which nothing runs on the server: no thinking indicator, no running clock.
  const IDLE = ["queued", "awaiting_review", "parked"];
  const STREAM_RENDER_MS = 80;  // a streaming bubble re-renders at most this often
  const THINKING_AFTER_MS = 700;
  const providers = JSON.parse(($("#model-providers") || {}).textContent || "{}");
  const state = { socket: null, backoff: 500, tasks: {}, current: null, pending: [], sent: null };
  window.agentkitRendered = {};  // task id -> seqs rendered, in order (diagnostics and tests)
  window.agentkitRenderers = window.agentkitRenderers || {};  // extension point: type -> fn(ev, view)
  window.agentkitFrameMs = [];  // per event: ms from receipt to the next painted frame (bench)
  // socket.js adds send and connect; thread.js openTask, adopt, showEmpty, modeLabel and
  // conversations; composer.js composerMode and composerCheck.
  const chat = window.agentkitChat = { state, composerFrame: (f) => f };

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
  // The bubble that streamed stops streaming (rendered now); what follows starts a new one.
  function closeBubble(view) {
    if (view.text) { setBubble(view.text, view.text.raw, false); view.text = null; }
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
        el("span", { "data-role": "cost" }),
        el("span", { "data-role": "branch", title: "the task's branch and its newest commit (repository workspaces)" })));
    header.querySelector("[data-role=stop]").addEventListener("click", (e) => { e.target.disabled = true; e.target.textContent = "Stopping…"; chat.send({ type: "cancel", task_id: taskId }); });
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
    // a waiting turn's notice has its own Cancel: one button, not two
    stop.hidden = finished || (status === "queued" && !!view.noticed);
    if (!stop.disabled) stop.textContent = status === "queued" ? "Cancel" : "Stop";
    if (finished || IDLE.includes(status)) view.thinking.hidden = true;
    // A finished turn's tool cards fold away: the thread reads as questions and answers.
    if (finished) view.body.querySelectorAll(":scope > details.tool-card[open]").forEach((d) => { d.open = false; });
    view.root.querySelector("[data-role=delete]").hidden = !finished || view.owner === false;
    view.root.querySelector("[data-role=changes]").hidden = !(finished && (view.editedFiles || view.branch));
    if (finished && !view.branchAsked && WRITING_MODES.includes(view.mode)) loadBranch(view);
  }

  // A task on a repository workspace works on its own branch (docs/repositories.md): once it
  // finishes, its header names the branch and commit, and Changes offers its hand-offs.
  const WRITING_MODES = ["react", "plan_exec", "team_collab"];
  async function loadBranch(view) {
    view.branchAsked = true;
    const resp = await fetch("/api/tasks/" + view.id, { credentials: "same-origin" }).catch(() => null);
    if (!resp || !resp.ok) return;
    const data = await resp.json().catch(() => ({}));
    if (!data.branch) return;
    view.branch = data.branch;
    meta(view, "branch", "⎇ " + data.branch + (data.commit ? " @ " + data.commit.slice(0, 7) : ""));
    view.root.querySelector("[data-role=changes]").hidden = false;
  }

  function showUsage(view, usage, cost) {
    if (!usage) return;
    const input = usage.input_tokens || 0;
    const cached = usage.cache_read_tokens || 0;
    const about = usage.estimated ? "~" : "";  // the server sent no usage: estimated from text
    meta(view, "tokens", "tokens " + about + input + " in · " + about + (usage.output_tokens || 0) + " out");
    meta(view, "cache", "cache " + (input ? Math.round((100 * cached) / input) : 0) + "%");
    if (typeof cost === "number") meta(view, "cost", "$" + cost.toFixed(4));
    view.footer.textContent = "tokens in " + about + input + " (cached " + cached + ") · out " + about + (usage.output_tokens || 0) + (typeof cost === "number" ? " · $" + cost.toFixed(4) : "");
  }

  function showComposerError(text) { composerError.textContent = text; composer.classList.toggle("has-error", Boolean(text)); }

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
  Object.assign(chat, {
    el, note, newBubble, setBubble, closeBubble, taskView, attach, meta, setStatus, showUsage, tickClock,
    showComposerError, refreshHistory, refreshHistorySoon, providers, FINISHED, IDLE,
  });
  // turns.js and socket.js come next, then thread.js, which opens what the URL names and connects.
})();
