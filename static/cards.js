// What a tool card says in its one-line summary, so a collapsed card still tells what happened:
// read_file (path and symbol or lines), search (pattern and hits), shell and run_tests (command and
// exit code; the tail of the output comes first in the card), the editor (path and the change).
// turns.js calls window.agentkitCards.call(name, args) on tool_call and .result(...) on tool_result.
(function () {
  "use strict";
  const TAIL_LINES = 6;

  function short(text, n) {
    const s = String(text == null ? "" : text).replace(/\s+/g, " ").trim();
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  function call(name, args) {
    const a = args || {};
    switch (name) {
      case "read_file":
        return short(a.path, 80) + (a.symbol ? " · " + short(a.symbol, 60) : a.start_line ? " · lines " + a.start_line + "–" + (a.end_line || "end") : "");
      case "search":
        return (a.pattern ? "/" + short(a.pattern, 60) + "/" : "files " + short(a.glob, 60)) + (a.path && a.path !== "." ? " in " + short(a.path, 60) : "") + (a.pattern && a.glob ? " (" + short(a.glob, 40) + ")" : "");
      case "shell":
        return "$ " + short(a.command, 100);
      case "run_tests":
        return a.command ? "$ " + short(a.command, 100) : "the project's tests";
      case "str_replace_editor": {
        const what = { view: "view", create: "create", str_replace: "replace text in", insert: "insert into", undo_edit: "undo the last edit of" }[a.command] || a.command || "edit";
        return what + " " + short(a.path, 80);
      }
      default: {
        const mcp = mcpTool(name);  // an MCP server's tool: say which server
        return mcp ? "MCP " + mcp.server + " · " + mcp.tool + " " + short(JSON.stringify(a), 80) : "";
      }
    }
  }

  // `<server>__<tool>` (apps/tools/mcp/names.py) -> {server, tool}; builtins have no "__".
  function mcpTool(name) {
    const m = /^([A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*)__(.+)$/.exec(String(name || ""));
    return m ? { server: m[1], tool: m[2] } : null;
  }

  function hits(output) {
    const lines = String(output || "").split("\n").filter((l) => l.trim() && !l.startsWith("["));
    if (lines.length === 1 && /^no (match|file)/i.test(lines[0])) return 0;
    return lines.length;
  }

  // {state, tail}: the summary's outcome text and, for commands, the last lines of the output.
  function result(name, args, d) {
    const data = d.data || {};
    const ok = d.ok !== false;
    const failed = ok ? "" : "error" + (d.error_code ? " · " + d.error_code : "");
    const tail = (text) => String(text || "").trimEnd().split("\n").slice(-TAIL_LINES).join("\n");
    switch (name) {
      case "search": {
        const n = hits(d.output);
        return { state: ok ? n + (n === 1 ? " hit" : " hits") : failed };
      }
      case "shell":
        if (typeof data.exit_code === "number") return { state: "exit " + data.exit_code + (data.timed_out ? " · timed out" : ""), tail: tail(d.output) };
        return { state: failed || "done", tail: tail(d.output) };
      case "run_tests": {
        const commands = data.commands || [];
        const codes = commands.map((c) => c.exit_code).filter((c) => typeof c === "number");
        const state = (ok ? "passed" : "failed") + (codes.length ? " · exit " + codes.join(", ") : "");
        return { state, tail: tail(d.output || d.error) };
      }
      case "str_replace_editor":
        return { state: ok ? (data.diff ? "changed" : "done") : failed };
      default:
        return { state: ok ? "done" : failed };
    }
  }

  window.agentkitCards = { call, result, mcpTool };
})();
