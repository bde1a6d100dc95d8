// The chat's thread (issue 30): the pane shows one conversation, oldest turn first; the URL names
// the conversation and the task (/?c=<conversation>#task-<id>), so Back, Forward and reload work;
// the task just sent joins the thread on its first event; an empty page offers example prompts.
// Loaded after chat.js, turns.js and socket.js, whose parts it uses through window.agentkitChat.
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const chat = window.agentkitChat;
  const { state, send, el, taskView, attach } = chat;
  const messages = $("#messages");
  const box = $("#message");
  chat.navigation = 0;  // bumped by every open, "New conversation" and an adopted task: a stale open stops

  // ── conversations (issue 13) ── follow-ups continue the conversation of the task on screen
  // ("conversation" in the user_message frame); "New conversation" starts a fresh one; the
  // sidebar groups tasks by conversation; the footer shows cache reads/writes, the hit rate and
  // the conversation's totals.
  const conversations = chat.conversations = {
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
      chat.refreshHistory();
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
  (function addNewConversationButton() {
    const button = el("button", { type: "button", id: "new-conversation", class: "link", text: "New conversation" });
    button.addEventListener("click", () => conversations.startNew());
    $(".composer-meta").append(button);
  })();
  chat.composerFrame = (frame) => conversations.decorate(frame);

  // The first event of the task just sent: it joins the thread on screen (a new conversation
  // when none was), the URL names it (a new history entry: Back returns to the task before).
  function adopt(view, ev) {
    const sent = state.sent;
    chat.navigation += 1;  // an open still loading (e.g. the latest conversation's) is dropped
    state.awaitingNew = false;
    state.sent = null;
    messages.querySelectorAll(":scope > .pending-task").forEach((n) => n.remove());
    const conversation = ev.data.conversation || (sent && sent.frame.conversation) || null;
    if (conversation) conversations.byTask[view.id] = conversation;
    else lookupConversation(view.id).then((id) => { if (id && state.current === view.id) { conversations.current = id; setUrl(view.id, false); } });
    if (!conversation || conversation !== conversations.current) for (const node of [...messages.children]) node.remove();
    conversations.current = conversation;
    state.current = view.id;
    attach(view);
    setUrl(view.id, true);
    if (window.agentkitSidebar) window.agentkitSidebar.mark(conversation, view.id); else chat.refreshHistory();
  }

  // ── the thread: the URL names the conversation and the task (?c=<id>#task-<id>); opening a
  // task shows its whole conversation, oldest turn first, and scrolls to the task ──────────────
  function setUrl(taskId, push) {
    const c = conversations.byTask[taskId] || conversations.current;
    const url = "/" + (c ? "?c=" + c : "") + "#task-" + taskId;
    if (location.pathname + location.search + location.hash === url) return;
    if (push) history.pushState({ task: taskId }, "", url); else history.replaceState({ task: taskId }, "", url);
  }
  async function lookupConversation(taskId) {
    const resp = await fetch("/api/tasks/" + taskId, { credentials: "same-origin" }).catch(() => null);
    if (!resp || !resp.ok) return null;
    const id = (await resp.json()).conversation || null;
    if (id) conversations.byTask[taskId] = id;
    return id;
  }
  async function threadTasks(conversation, taskId) {
    if (!conversation) return [taskId];
    const resp = await fetch("/api/conversations/" + conversation, { credentials: "same-origin" }).catch(() => null);
    if (!resp || !resp.ok) return [taskId];
    const ids = (await resp.json()).tasks.map((t) => t.id);
    for (const id of ids) conversations.byTask[id] = conversation;
    return ids.includes(taskId) ? ids : ids.concat([taskId]);
  }
  // how: "push" (a new history entry), "replace", or "none" (Back/Forward brought us here)
  async function openTask(taskId, info, how) {
    const mine = ++chat.navigation;
    state.current = taskId;
    const conversation = (info && info.conversation) || conversations.byTask[taskId] || await lookupConversation(taskId);
    const ids = await threadTasks(conversation, taskId);
    if (mine !== chat.navigation) return;  // the reader went elsewhere meanwhile
    conversations.current = conversation;
    if (how !== "none") setUrl(taskId, how === "push");
    for (const node of [...messages.children]) {
      if (node.matches(".pending-task")) continue;  // a message sent meanwhile waits for its task
      if (!(node.matches("article.task") && ids.includes(Number(node.dataset.taskId)))) node.remove();
    }
    for (const id of ids) {
      const fresh = !state.tasks[id];
      const view = taskView(id);
      if (id === taskId && info && info.mine === false) view.owner = false;
      if (fresh) send({ type: "resume", task_id: id, after_seq: 0 });
      attach(view);
    }
    const target = state.tasks[taskId];
    requestAnimationFrame(() => {
      if (taskId === ids[ids.length - 1]) messages.scrollTop = messages.scrollHeight;
      else target.root.scrollIntoView({ block: "start" });
    });
    if (window.agentkitSidebar) window.agentkitSidebar.mark(conversation, taskId);
    chat.composerMode();
  }
  function openFromUrl(how) {
    const m = /^#task-(\d+)$/.exec(location.hash);
    if (!m) { for (const node of [...messages.children]) node.remove(); conversations.current = null; state.current = null; showEmpty(); return false; }
    const c = Number(new URLSearchParams(location.search).get("c")) || null;
    openTask(Number(m[1]), c ? { conversation: c } : null, how);
    return true;
  }
  window.addEventListener("popstate", () => openFromUrl("none"));

  // ── the empty page: what the modes do, and a few prompts to start from ───────────────────────
  const MODES = window.agentkitModes = JSON.parse(($("#mode-labels") || {}).textContent || "{}");  // mode -> [name, one line]
  function modeLabel(mode) { return (MODES[mode] || [mode])[0]; }
  window.agentkitModeLabel = modeLabel;
  const EXAMPLES = [
    ["Explain what this workspace's code does", "react"],
    ["Add a function that reverses a string, with a test", "plan_exec"],
    ["What is the difference between a list and a tuple in Python?", "direct_chat"],
  ];
  function showEmpty() {
    if (messages.querySelector(".empty-chat")) return;
    const list = el("ul", { class: "examples" });
    for (const [text, mode] of EXAMPLES) {
      const b = el("button", { type: "button", class: "example", "data-mode": mode }, el("span", { text }), el("span", { class: "hint", text: modeLabel(mode) }));
      b.addEventListener("click", () => {
        box.value = text;
        const select = $("#mode");
        if ([...select.options].some((o) => o.value === mode)) select.value = mode;
        select.dispatchEvent(new Event("change"));
        chat.composerCheck();
        box.focus();
      });
      list.append(el("li", {}, b));
    }
    messages.append(el("div", { class: "empty-chat" },
      el("h2", { text: "What should the agent do?" }),
      el("p", { class: "hint", text: "Type below and press Enter. Try one of these:" }), list));
  }


  Object.assign(chat, { openTask: (id, info) => openTask(id, info, "push"), adopt, showEmpty, modeLabel });
  state.openedFromHash = openFromUrl("replace");
  chat.connect();
  chat.refreshHistory();
})();
