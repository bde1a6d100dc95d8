// The chat page's sidebar: the conversations, newest first (title = first message, renamable;
// the latest turn's state; search over tasks), opening the most recent one on load, and the workspace
// tools (create from a server directory, upload an archive, reset the demo).
(function () {
  "use strict";
  const $ = (sel) => document.querySelector(sel);
  const el = window.agentkitEl;
  const chat = window.agentkitChat;
  const list = $("#task-history");
  const search = $("#task-search");
  let first = true;
  let timer = null;

  function firstLine(text) { return (text || "").split("\n").find((l) => l.trim()) || "(empty)"; }
  function when(iso) {
    const d = new Date(iso);
    const today = new Date().toDateString() === d.toDateString();
    return today ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : d.toLocaleDateString([], { month: "short", day: "numeric" });
  }

  // The badge says the state in one word; "review" = a spec waits for you.
  const SHORT = { awaiting_review: "review", gave_up_after_reflections: "gave up" };
  const badge = (status) => el("span", { class: "badge status-" + status, text: SHORT[status] || status });
  let titles = {};     // conversation id -> title (GET /api/conversations)
  let marked = { conversation: null, task: null };
  let renaming = false;

  async function refresh() {
    const q = search.value.trim();
    try {
      const [resp, convs] = await Promise.all([
        fetch("/api/tasks" + (q ? "?q=" + encodeURIComponent(q) : ""), { credentials: "same-origin" }),
        fetch("/api/conversations", { credentials: "same-origin" }).then((r) => r.ok ? r.json() : null).catch(() => null),
      ]);
      if (!resp.ok || renaming) return;  // a title being edited is not redrawn away
      const data = await resp.json();
      if (convs) titles = Object.fromEntries(convs.conversations.map((c) => [c.id, c.title]));
      draw(data.tasks, q);
      if (first) {
        first = false;
        for (const t of data.tasks) chat.state.maxTaskId = Math.max(chat.state.maxTaskId || 0, t.id);
        if (!chat.state.openedFromHash && !chat.state.chose && data.tasks.length && !chat.state.current && !chat.state.awaitingNew && !q) chat.openTask(data.tasks[0].id, data.tasks[0]);
      }
    } catch (err) { /* offline: keep the old list */ }
  }

  // One <li class="conversation"> per conversation, the one with the newest turn first: its
  // title (the first message unless renamed; Rename edits it), the latest turn's state, and —
  // for the conversation on screen or when searching — its turns, oldest first.
  function draw(tasks, q) {
    list.replaceChildren();
    if (!tasks.length) list.append(el("li", { class: "empty", text: q ? "No task matches “" + q + "”." : "No conversations yet." }));
    const groups = new Map();
    for (const t of tasks) {
      if (t.conversation && chat.conversations) chat.conversations.byTask[t.id] = t.conversation;
      const key = t.conversation ? "c" + t.conversation : "task-" + t.id;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(t);
    }
    for (const [key, group] of groups) {
      const latest = group[0], oldest = group[group.length - 1];
      const id = latest.conversation;
      const title = (id && titles[id]) || firstLine(oldest.goal);
      const open = el("a", { href: (id ? "/?c=" + id : "/") + "#task-" + latest.id, class: "history-link conversation-link" },
        el("span", { class: "history-first", "data-role": "conversation-title", text: title }),
        el("span", { class: "history-meta" },
          el("time", { datetime: latest.created_at, text: when(latest.created_at) }),
          el("span", { text: group.length + (group.length === 1 ? " turn" : " turns") }),
          badge(latest.status)));
      open.addEventListener("click", (e) => { e.preventDefault(); go(latest); });
      const head = el("div", { class: "conversation-head-row" }, open);
      if (id) head.append(renameButton(id, title));
      const li = el("li", { class: "conversation", "data-conversation": key }, head);
      if (q || (id && id === marked.conversation) || (!id && latest.id === marked.task)) {
        const inner = el("ul", { class: "conversation-tasks" });
        for (const t of group.slice().reverse()) inner.append(item(t));
        li.append(inner);
      }
      if (id && id === marked.conversation) li.classList.add("current");
      list.append(li);
    }
  }

  function go(t) {
    chat.openTask(t.id, t);
    document.body.classList.remove("sidebar-open");
  }

  function renameButton(id, title) {
    const button = el("button", { type: "button", class: "link rename", "aria-label": "Rename conversation “" + title + "”", title: "Rename", text: "✎" });
    button.addEventListener("click", () => {
      renaming = true;
      const input = el("input", { type: "text", class: "rename-input", "aria-label": "Conversation title", maxlength: "200" });
      input.value = title;
      const row = button.parentElement;
      row.querySelector(".conversation-link").hidden = true;
      button.replaceWith(input);
      input.focus();
      input.select();
      let done = false;
      const finish = async (save) => {
        if (done) return;
        done = true;
        renaming = false;
        const text = input.value.trim();
        if (save && text && text !== title) {
          const resp = await fetch("/api/conversations/" + id, {
            method: "PATCH", credentials: "same-origin",
            headers: { "Content-Type": "application/json", "X-CSRFToken": window.agentkitCsrf() },
            body: JSON.stringify({ title: text }),
          }).catch(() => null);
          if (!resp || !resp.ok) {
            const body = resp ? await resp.json().catch(() => ({})) : {};
            alert("Not renamed: " + ((body.error && body.error.message) || "the server did not answer; try again."));
          }
        }
        refresh();
      };
      input.addEventListener("keydown", (e) => {
        if (e.key === "Enter") { e.preventDefault(); finish(true); }
        if (e.key === "Escape") { e.preventDefault(); finish(false); }
      });
      input.addEventListener("blur", () => finish(true));
    });
    return button;
  }

  function item(t) {
    const a = el("a", { href: (t.conversation ? "/?c=" + t.conversation : "/") + "#task-" + t.id, class: "history-link" },
      el("span", { class: "history-first", text: firstLine(t.goal) }),
      el("span", { class: "history-meta" },
        el("time", { datetime: t.created_at, text: when(t.created_at) }),
        el("span", { class: "mode", title: t.mode, text: window.agentkitModeLabel ? window.agentkitModeLabel(t.mode) : t.mode }),
        badge(t.status)));
    if (t.id === chat.state.current) a.setAttribute("aria-current", "true");
    a.addEventListener("click", (e) => { e.preventDefault(); go(t); });
    return el("li", { "data-task-id": String(t.id) }, a);
  }

  // thread.js says which conversation and task are on screen.
  function mark(conversation, taskId) {
    const changed = marked.conversation !== conversation || marked.task !== taskId;
    marked = { conversation, task: taskId };
    if (changed) refresh();
  }

  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refresh, 200); });

  // Narrow screens: the sidebar is a drawer.
  const openButton = $("#sidebar-open");
  openButton.addEventListener("click", () => { document.body.classList.add("sidebar-open"); openButton.setAttribute("aria-expanded", "true"); search.focus(); });
  $("#sidebar-close").addEventListener("click", () => { document.body.classList.remove("sidebar-open"); openButton.setAttribute("aria-expanded", "false"); openButton.focus(); });

  // ── workspaces ───────────────────────────────────────────────────────────────────────────────
  const status = $("#ws-status");
  async function post(url, body, isForm) {
    status.textContent = "Working…";
    const headers = { "X-CSRFToken": window.agentkitCsrf() };
    if (!isForm) headers["Content-Type"] = "application/json";
    const resp = await fetch(url, { method: "POST", credentials: "same-origin", headers, body: isForm ? body : JSON.stringify(body) });
    const data = await resp.json().catch(() => ({}));
    if (!resp.ok) { status.textContent = "Not done: " + ((data.error && data.error.message) || resp.status); return null; }
    return data;
  }
  function addWorkspace(ws) {
    const select = $("#workspace");
    if (!select.querySelector('option[value="' + ws.id + '"]')) select.append(el("option", { value: String(ws.id), text: ws.name }));
    select.value = String(ws.id);
    status.textContent = "Workspace “" + ws.name + "” is ready and selected.";
  }
  const fromDir = $("#ws-from-dir");
  if (fromDir) fromDir.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!fromDir.elements.directory) return;
    const ws = await post("/api/workspaces", { name: fromDir.elements.name.value, directory: fromDir.elements.directory.value });
    if (ws) { addWorkspace(ws); fromDir.reset(); }
  });
  const clone = $("#ws-clone");  // a repository workspace (docs/repositories.md)
  if (clone) clone.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { name: clone.elements.name.value, git_url: clone.elements.git_url.value };
    if (clone.elements.branch.value.trim()) body.branch = clone.elements.branch.value.trim();
    const ws = await post("/api/workspaces", body);
    if (ws) { addWorkspace(ws); clone.reset(); status.textContent += " Base branch: " + ws.base_branch + "."; }
  });
  const upload = $("#ws-upload");
  if (upload) upload.addEventListener("submit", async (e) => {
    e.preventDefault();
    const ws = await post("/api/workspaces/upload", new FormData(upload), true);
    if (ws) { addWorkspace(ws); upload.reset(); }
  });
  const reset = $("#ws-reset-demo");
  if (reset) reset.addEventListener("click", async () => {
    if (!confirm("Reset the demo workspace to its shipped content? Changes made in it are lost.")) return;
    const ws = await post("/api/workspaces/demo/reset", {});
    if (ws) status.textContent = "The demo workspace is restored.";
  });

  window.agentkitSidebar = { refresh, mark };
  refresh();
})();
