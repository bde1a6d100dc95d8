// The chat's composer: nothing typed is lost (a rejected message comes back into the box, nothing
// is sent while disconnected, the length limit is shown before sending); Enter sends, Shift+Enter
// adds a line; a message sent while a turn runs is queued as the next turn; while a spec of the
// thread waits for review, the text goes to it as feedback.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const chat = window.agentkitChat;
  const { state, send, el, FINISHED } = chat;
  const messages = $("#messages");
  const box = $("#message");
  const sendButton = $("#send");
  const composer = $("#composer");
  const composerError = $("#composer-error");
  const MODES = window.agentkitModes || {};

  // ── composer: nothing typed is lost ──────────────────────────────────────────────────────────
  function composerCheck() {
    const MAX_CHARS = Number(composer.dataset.maxChars || 0);  // the server's limit, read per check
    const length = box.value.length;
    const over = MAX_CHARS && length > MAX_CHARS;
    sendButton.disabled = !box.value.trim() || over;
    $("#composer-limit").textContent = (length ? length + " / " : "Up to ") + MAX_CHARS + " characters · Enter sends · Shift+Enter adds a line";
    if (over) chat.showComposerError("Too long: " + length + " characters, at most " + MAX_CHARS + ". Shorten it or attach the text as a file in the workspace.");
    else if (composer.classList.contains("has-error") && composerError.dataset.kind === "length") chat.showComposerError("");
    composerError.dataset.kind = over ? "length" : "";
  }
  box.addEventListener("input", composerCheck);

  // While a spec of the thread waits for review, what is typed goes to it as feedback (the
  // planner revises the spec); "Send as a new turn" queues it as the next turn instead.
  const asTurn = el("button", { type: "button", class: "link", id: "send-as-turn", hidden: "", text: "Send as a new turn instead" });
  $(".composer-side").append(asTurn);
  let forceTurn = false;
  asTurn.addEventListener("click", () => { forceTurn = true; composer.requestSubmit(); forceTurn = false; });
  function specAwaitingReview() {
    for (const view of Object.values(state.tasks)) {
      if (!view.root.isConnected || view.status !== "awaiting_review") continue;
      const actions = view.root.querySelector(".spec-card [data-role=spec-actions]");
      if (actions) return actions.closest(".spec-card");
    }
    return null;
  }
  function composerMode() {
    const spec = specAwaitingReview();
    composer.classList.toggle("feedback-mode", Boolean(spec));
    sendButton.textContent = spec ? "Send as feedback" : "Send";
    asTurn.hidden = !spec;
    box.placeholder = spec ? "Feedback on the spec above: Enter sends it and the planner revises the spec…" : "Describe the task… (Enter sends, Shift+Enter adds a line)";
  }
  window.agentkitChat.composerMode = composerMode;

  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = box.value.trim();
    if (!text || sendButton.disabled) return;
    const spec = !forceTurn && specAwaitingReview();
    if (spec) {
      spec.querySelectorAll("[data-role=spec-actions] button").forEach((b) => { b.disabled = true; });
      send({ type: "spec_review_reply", spec_review_id: spec.dataset.specReviewId, decision: "reject", feedback: text });
      box.value = "";
      composerCheck();
      return;
    }
    const skill = $("#skill");
    let frame = { type: "user_message", text, workspace: $("#workspace").value, mode: $("#mode").value, client_msg_id: crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random() };
    if (skill && skill.value) frame.skill = skill.value;
    frame = window.agentkitChat.composerFrame(frame);  // hook: e.g. a conversation id
    const connecting = state.socket && state.socket.readyState === WebSocket.CONNECTING && window.agentkitSocket.opens === 0;
    if (!connecting && (!state.socket || state.socket.readyState !== WebSocket.OPEN)) {  // keep it; say why
      composerError.dataset.offline = "1";
      chat.showComposerError("Not connected to the server (reconnecting…): your message is kept here; send it again once connected.");
      return;
    }
    state.awaitingNew = true;
    // Its task is newer than every task the page knows now: the sidebar's first list may come
    // later and already hold it, so the bound is taken here, not read when its first event comes.
    const known = Math.max(state.maxTaskId || 0, ...Object.keys(state.tasks).map(Number));
    state.sent = { text: box.value, frame, after: known };
    messages.querySelectorAll(":scope > .empty-chat").forEach((n) => n.remove());
    const busy = Object.values(state.tasks).some((v) => v.root.isConnected && !FINISHED.includes(v.status));
    messages.append(el("div", { class: "pending-task", role: "status" },
      el("div", { class: "bubble user", text }), el("span", { class: "hint", text: busy ? "Queued after the running turn…" : "Starting…" })));
    state.forceScroll = true;
    chat.scheduleScroll();
    chat.showComposerError("");
    send(frame);
    box.value = "";
    composerCheck();
  });
  // Enter sends (as in every chat); Shift+Enter adds a line; an IME composition is left alone.
  box.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    event.preventDefault();
    composer.requestSubmit();
  });

  const modeSelect = $("#mode");
  Object.assign(chat, { composerCheck, composerMode });
  modeSelect.addEventListener("change", () => { $("#mode-description").textContent = (MODES[modeSelect.value] || ["", ""])[1]; });
  composerCheck();
})();
