// The chat's one WebSocket to /ws/chat/ (batch frames): each event goes to its task's view once,
// in seq order (turns.js renders it); the socket reconnects with backoff and resumes each task
// from the last seq it saw, so a reload or a dropped connection never loses or repeats an event.
// Frames sent while it is closed wait and go out when it opens; so does a message whose task had
// not shown when its socket closed. An error frame that answers a frame (no task event) puts a
// rejected message back into the box.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const chat = window.agentkitChat;
  const { state, el, taskView, meta, showUsage, showComposerError } = chat;
  const messages = $("#messages");
  const box = $("#message");
  const composerError = $("#composer-error");
  const COMPOSER_EVENTS = ["spec_review_request", "spec_review_resolved", "task_started", "task_waiting", "task_finished"];
  // Diagnostics and tests: how often the socket reopened, and a way to drop it on purpose.
  window.agentkitSocket = { opens: 0, drop: () => state.socket && state.socket.close(), inject: (ev) => receive(ev) };

  function receive(ev) {
    const t0 = performance.now();
    onEvent(ev);
    requestAnimationFrame(() => setTimeout(() => { window.agentkitFrameMs.push(performance.now() - t0); if (window.agentkitFrameMs.length > 5000) window.agentkitFrameMs.splice(0, 1000); }, 0));
  }

  function onEvent(ev) {
    if (ev.type === "error" && (ev.seq == null)) { protocolError(ev); return; }
    if (ev.task_id == null || typeof ev.seq !== "number") return;
    const view = taskView(ev.task_id);
    if (ev.seq <= view.lastSeq) return;  // already shown
    const after = state.sent ? state.sent.after : (state.maxTaskId || 0);
    if (state.awaitingNew && ev.task_id > after && (ev.type === "task_started" || ev.type === "task_waiting")) chat.adopt(view, ev);
    view.lastSeq = ev.seq;
    view.lastEventAt = Date.now();
    view.thinking.hidden = true;
    (window.agentkitRendered[ev.task_id] = window.agentkitRendered[ev.task_id] || []).push(ev.seq);
    if (typeof ev.data.step === "number" && ev.data.step > 0) meta(view, "steps", "step " + ev.data.step);
    if (ev.type !== "task_finished" && ev.data.usage) showUsage(view, ev.data.usage, ev.data.cost);
    chat.renderEvent(view, ev);
    if (COMPOSER_EVENTS.includes(ev.type)) { if (chat.composerMode) chat.composerMode(); chat.refreshHistorySoon(); }
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
      // A message sent on this socket whose task never showed: the server may have made the task
      // and lost the socket before its first event. The same frame (same client_msg_id) goes
      // again on the next socket; the server answers with that task's events from the start.
      if (state.sent && state.awaitingNew && !state.pending.includes(state.sent.frame)) state.pending.push(state.sent.frame);
      setTimeout(connect, state.backoff);
      state.backoff = Math.min(state.backoff * 2, 10000);
    });
  }

  Object.assign(chat, { send, connect, scheduleScroll });
})();
