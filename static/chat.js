// agentkit chat page: one WebSocket to /ws/chat/, events rendered by type. Unknown types are
// ignored. The socket reconnects with backoff and resumes each task from the last seq it saw,
// so a reload or a dropped connection never loses or repeats an event.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const messages = $("#messages");
  const state = { socket: null, backoff: 500, tasks: {}, current: null, pending: [] };
  window.agentkitRendered = {};  // task id -> seqs rendered, in order (diagnostics and tests)
  // Diagnostics and tests: how often the socket reopened, and a way to drop it on purpose.
  window.agentkitSocket = { opens: 0, drop: () => state.socket && state.socket.close() };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k === "text") node.textContent = v; else node.setAttribute(k, v);
    }
    for (const c of children) if (c != null) node.append(c);
    return node;
  }

  function taskView(taskId) {
    let view = state.tasks[taskId];
    if (view) return view;
    const root = el("article", { class: "task", "data-task-id": String(taskId) });
    const header = el("header", { class: "task-header" },
      el("span", { class: "task-title", text: "Task #" + taskId }),
      el("span", { class: "badge status-queued", "data-role": "status", text: "queued" }),
      el("button", { class: "link cancel", type: "button", text: "Cancel" }));
    header.querySelector(".cancel").addEventListener("click", () => send({ type: "cancel", task_id: taskId }));
    const body = el("div", { class: "task-body" });
    const footer = el("footer", { class: "task-footer", "data-role": "usage" });
    root.append(header, body, footer);
    messages.append(root);
    view = state.tasks[taskId] = { root, body, footer, lastSeq: 0, text: null, cards: {}, streamedSteps: new Set() };
    return view;
  }

  function assistantText(view) {
    if (!view.text) {
      view.text = el("div", { class: "bubble assistant" });
      view.body.append(view.text);
    }
    return view.text;
  }

  function setStatus(view, status) {
    const badge = view.root.querySelector("[data-role=status]");
    badge.textContent = status;
    badge.className = "badge status-" + status;
    const finished = ["completed", "failed", "cancelled", "gave_up_after_reflections", "parked"].includes(status);
    view.root.querySelector(".cancel").hidden = finished;
  }

  function diffView(diff) {
    const pre = el("pre", { class: "diff" });
    for (const line of diff.split("\n")) {
      const cls = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "";
      pre.append(el("span", { class: cls, text: line + "\n" }));
    }
    return pre;
  }

  const render = {
    task_started(view, ev) {
      setStatus(view, "running");
      if (ev.data.goal) view.body.append(el("div", { class: "bubble user", text: ev.data.goal }));
      if (ev.data.mode) view.root.querySelector(".task-title").textContent = "Task #" + ev.task_id + " · " + ev.data.mode + (ev.data.skill ? " · " + ev.data.skill : "");
    },
    token(view, ev) {
      if (ev.data.restart) {  // the model call is being retried: drop this step's text so far
        if (view.text) view.text.textContent = "";
        return;
      }
      view.streamedSteps.add(ev.data.step);
      assistantText(view).append(document.createTextNode(ev.data.text || ""));
    },
    tool_call(view, ev) {
      view.text = null;  // text after a tool call starts a new bubble
      const args = JSON.stringify(ev.data.arguments || {}, null, 2);
      const card = el("details", { class: "tool-card", "data-tool": ev.data.name || "" },
        el("summary", {}, el("span", { class: "tool-name", text: ev.data.name || "tool" }), el("span", { class: "tool-state", text: "running…" })),
        el("div", { class: "tool-section" }, el("div", { class: "label", text: "arguments" }), el("pre", { class: "args", text: args })));
      view.body.append(card);
      view.cards[ev.data.call_id || ev.data.id || ev.seq] = card;
    },
    tool_result(view, ev) {
      const card = view.cards[ev.data.call_id || ev.data.id] || Object.values(view.cards).pop();
      if (!card) return;
      const ok = ev.data.ok !== false;
      card.classList.add(ok ? "ok" : "failed");
      card.querySelector(".tool-state").textContent = ok ? "done" : "error" + (ev.data.error_code ? " · " + ev.data.error_code : "");
      const section = el("div", { class: "tool-section" }, el("div", { class: "label", text: ok ? "result" : "error" }));
      const extra = ev.data.data || {};
      if (extra.diff) section.append(diffView(extra.diff));
      section.append(el("pre", { class: "result", text: ok ? (ev.data.output || "") : ((ev.data.error || "") + (ev.data.output ? "\n" + ev.data.output : "")) }));
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
      if (!view.streamedSteps.has(ev.data.step) && ev.data.text) assistantText(view).textContent = ev.data.text;
      view.text = null;
    },
    error(view, ev) {
      const e = (ev.data && ev.data.error_struct) || {};
      view.body.append(el("div", { class: "bubble error", role: "alert", text: (e.error_code ? "[" + e.error_code + "] " : "") + (e.message || "error") }));
      view.text = null;
    },
    task_finished(view, ev) {
      setStatus(view, ev.data.status || "completed");
      const u = ev.data.usage || {};
      const cost = typeof ev.data.cost === "number" ? " · $" + ev.data.cost.toFixed(4) : "";
      view.footer.textContent = "tokens in " + (u.input_tokens || 0) + " (cached " + (u.cache_read_tokens || 0) + ") · out " + (u.output_tokens || 0) + cost;
      conversations.usageFooter(view, ev);  // issue 13: cache writes, hit rate, conversation totals
      refreshHistory();
    },
  };

  function onEvent(ev) {
    if (ev.type === "error" && (ev.seq == null)) {  // a protocol error, not a task event
      const e = (ev.data && ev.data.error_struct) || {};
      messages.append(el("div", { class: "bubble error", role: "alert", text: "[" + (e.error_code || "error") + "] " + (e.message || "") }));
      return;
    }
    if (ev.task_id == null || typeof ev.seq !== "number") return;
    const view = taskView(ev.task_id);
    if (ev.seq <= view.lastSeq) return;  // already shown
    view.lastSeq = ev.seq;
    (window.agentkitRendered[ev.task_id] = window.agentkitRendered[ev.task_id] || []).push(ev.seq);
    const handler = render[ev.type];
    if (handler) handler(view, ev);
    // Extension point (static/phases.js): extra renderers by event type, after the built-in one.
    const extra = window.agentkitRenderers && window.agentkitRenderers[ev.type];
    if (extra) extra(view, ev);
    messages.scrollTop = messages.scrollHeight;
    if (state.current === ev.task_id) history.replaceState(null, "", "#task-" + ev.task_id);
  }

  // ── conversations (issue 13) ── a self-contained block; its call sites are marked "issue 13".
  // Follow-ups continue the conversation of the task on screen ("conversation" in the
  // user_message frame); "New conversation" starts a fresh one; the sidebar groups tasks by
  // conversation; the footer shows cache reads/writes, the hit rate and the conversation's totals.
  const conversations = {
    current: null,          // conversation id that new messages continue; null = start a new one
    byTask: {},             // task id -> conversation id
    started(ev) { if (ev.data && ev.data.conversation) this.byTask[ev.task_id] = ev.data.conversation; },
    follow(taskId) { this.current = this.byTask[taskId] || null; },
    decorate(frame) { if (this.current) frame.conversation = this.current; return frame; },
    startNew() {
      this.current = null;
      messages.append(el("div", { class: "conversation-divider", role: "status", text: "New conversation" }));
      $("#message").focus();
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
    renderHistory(list, tasks, item) {
      const groups = new Map();
      for (const t of tasks) {
        if (t.conversation) this.byTask[t.id] = t.conversation;
        const key = t.conversation || "task-" + t.id;
        if (!groups.has(key)) groups.set(key, []);
        groups.get(key).push(t);
      }
      for (const [key, group] of groups) {
        const inner = el("ul", { class: "conversation-tasks" });
        for (const t of group.slice().reverse()) inner.append(item(t));  // oldest turn first
        list.append(el("li", { class: "conversation", "data-conversation": String(key) }, inner));
      }
    },
  };
  render.compression = (view, ev) => {  // the context was compressed (a summary replaced the middle)
    const d = ev.data || {};
    view.body.append(el("div", { class: "compression-note", role: "note",
      text: "Context compressed: " + d.tokens_before + " → " + d.tokens_after + " tokens (summary by " + d.summarized_by + ")" }));
    view.text = null;
  };
  (function addNewConversationButton() {
    const button = el("button", { type: "button", id: "new-conversation", class: "link", text: "New conversation" });
    button.addEventListener("click", () => conversations.startNew());
    $("#composer").append(button);
  })();
  // ── end of the conversations block ──

  function send(frame) {
    if (state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send(JSON.stringify(frame));
    else state.pending.push(frame);
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(proto + "//" + location.host + "/ws/chat/");
    state.socket = socket;
    socket.addEventListener("open", () => {
      state.backoff = 500;
      window.agentkitSocket.opens += 1;
      document.body.dataset.socket = "open";
      for (const [id, view] of Object.entries(state.tasks)) send({ type: "resume", task_id: Number(id), after_seq: view.lastSeq });
      const queued = state.pending.splice(0);
      for (const frame of queued) socket.send(JSON.stringify(frame));
    });
    socket.addEventListener("message", (msg) => { try { onEvent(JSON.parse(msg.data)); } catch (err) { console.error(err); } });
    socket.addEventListener("close", () => {
      document.body.dataset.socket = "closed";
      setTimeout(connect, state.backoff);
      state.backoff = Math.min(state.backoff * 2, 10000);
    });
  }

  async function refreshHistory() {
    const list = $("#task-history");
    try {
      const resp = await fetch("/api/tasks", { credentials: "same-origin" });
      if (!resp.ok) return;
      const data = await resp.json();
      list.replaceChildren();
      if (!data.tasks.length) list.append(el("li", { class: "empty", text: "No tasks yet." }));
      conversations.renderHistory(list, data.tasks, (t) => {  // issue 13: grouped by conversation
        const a = el("a", { href: "#task-" + t.id, text: "#" + t.id + " " + t.goal.slice(0, 40) });
        a.addEventListener("click", () => openTask(t.id));
        return el("li", {}, a, el("span", { class: "badge status-" + t.status, text: (window.agentkitStatusLabel || String)(t.status) }));
      });
    } catch (err) { /* offline: keep the old list */ }
  }

  window.agentkitOpenTask = (taskId) => openTask(taskId);  // issue 14: errors.js opens a retry
  function openTask(taskId) {
    state.current = taskId;
    conversations.follow(taskId);  // issue 13
    if (!state.tasks[taskId]) { taskView(taskId); send({ type: "resume", task_id: taskId, after_seq: 0 }); }
    state.tasks[taskId].root.scrollIntoView();
  }

  $("#composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const box = $("#message");
    const text = box.value.trim();
    if (!text) return;
    const skill = $("#skill");
    const frame = { type: "user_message", text, workspace: $("#workspace").value, mode: $("#mode").value, client_msg_id: crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random() };
    if (skill && skill.value) frame.skill = skill.value;
    conversations.decorate(frame);  // issue 13: a follow-up continues the current conversation
    state.awaitingNew = true;
    send(frame);
    box.value = "";
  });
  $("#message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("#composer").requestSubmit();
  });

  // New tasks become current when their first event arrives.
  const originalTaskStarted = render.task_started;
  render.task_started = (view, ev) => {
    conversations.started(ev);  // issue 13
    if (state.awaitingNew) { state.current = ev.task_id; state.awaitingNew = false; conversations.follow(ev.task_id); refreshHistory(); }
    originalTaskStarted(view, ev);
  };

  const fromHash = /^#task-(\d+)$/.exec(location.hash);
  if (fromHash) { state.current = Number(fromHash[1]); taskView(state.current); }
  connect();
  refreshHistory();
})();
