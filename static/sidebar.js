// The chat page's sidebar: task history (date, status, mode, first line; search; grouped by
// conversation), opening the most recent task on load, and the workspace
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

  async function refresh() {
    const q = search.value.trim();
    try {
      const resp = await fetch("/api/tasks" + (q ? "?q=" + encodeURIComponent(q) : ""), { credentials: "same-origin" });
      if (!resp.ok) return;
      const data = await resp.json();
      draw(data.tasks, q);
      if (first) {
        first = false;
        for (const t of data.tasks) chat.state.maxTaskId = Math.max(chat.state.maxTaskId || 0, t.id);
        if (!chat.state.openedFromHash && data.tasks.length && !chat.state.current && !chat.state.awaitingNew && !q) chat.openTask(data.tasks[0].id, data.tasks[0]);
      }
    } catch (err) { /* offline: keep the old list */ }
  }

  // One <li class="conversation"> per conversation (a task without one is its own), its turns
  // oldest first; newest conversations first.
  function draw(tasks, q) {
    list.replaceChildren();
    if (!tasks.length) list.append(el("li", { class: "empty", text: q ? "No task matches “" + q + "”." : "No tasks yet." }));
    const groups = new Map();
    for (const t of tasks) {
      if (t.conversation && chat.conversations) chat.conversations.byTask[t.id] = t.conversation;
      const key = t.conversation ? "c" + t.conversation : "task-" + t.id;
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(t);
    }
    for (const [key, group] of groups) {
      const inner = el("ul", { class: "conversation-tasks" });
      for (const t of group.slice().reverse()) inner.append(item(t));
      list.append(el("li", { class: "conversation", "data-conversation": key }, inner));
    }
  }

  function item(t) {
    const a = el("a", { href: "#task-" + t.id, class: "history-link" },
      el("span", { class: "history-first", text: firstLine(t.goal) }),
      el("span", { class: "history-meta" },
        el("time", { datetime: t.created_at, text: when(t.created_at) }),
        el("span", { class: "mode", text: t.mode }),
        el("span", { class: "badge status-" + t.status, text: (window.agentkitStatusLabel || String)(t.status) })));
    if (t.id === chat.state.current) a.setAttribute("aria-current", "true");
    a.addEventListener("click", (e) => {
      e.preventDefault();
      chat.openTask(t.id, t);
      for (const other of list.querySelectorAll("[aria-current]")) other.removeAttribute("aria-current");
      a.setAttribute("aria-current", "true");
      document.body.classList.remove("sidebar-open");
    });
    return el("li", { "data-task-id": String(t.id) }, a);
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

  window.agentkitSidebar = { refresh };
  refresh();
})();
