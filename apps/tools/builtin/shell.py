"""`shell`: run a command in the workspace, inside the sandbox (apps/engine/sandbox/).

The network follows ToolContext.network (off unless configured); writes outside the workspace
fail; the timeout is the model's `timeout` capped by the configured one; a command that runs
out of the sandbox's memory cap fails with `memory_limit` and what to do. Interactive programs
(editors, pagers, REPLs, `tail -f` ...) are refused up front with the non-interactive way to do
the same, since there is no terminal and they would only hang until the timeout. The phase
filter (ToolContext.command_filter) is consulted first.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from apps.engine.sandbox import Sandbox, SandboxResult, SandboxUnavailable, default_sandbox
from apps.engine.tools import Tool, ToolResult, truncate_output
from apps.tools.builtin.context import ToolContext

MAX_OUTPUT_CHARS = 10_000

_EDIT = "Use the str_replace_editor tool to view and edit files (or read_file to read them)."
_PAGE = "Use read_file, or `cat`, `head -n 50`, `tail -n 50`, `sed -n '10,40p' FILE`."
INTERACTIVE: dict[str, str] = {
    **dict.fromkeys(["vi", "vim", "nvim", "nano", "emacs", "pico", "joe", "mcedit"], _EDIT),
    **dict.fromkeys(["less", "more", "most"], _PAGE),
    **dict.fromkeys(["top", "htop", "atop", "btop"], "Use `ps aux` (one snapshot)."),
    "watch": "Run the command once; call the tool again later if you need a new value.",
    "man": "Use `COMMAND --help` instead.",
    "info": "Use `COMMAND --help` instead.",
    **dict.fromkeys(
        ["ssh", "telnet", "ftp", "sftp", "mosh"],
        "There are no remote sessions from the sandbox; work in the workspace.",
    ),
    "screen": "Run the command directly.",
    "tmux": "Run the command directly.",
}
REPLS = {
    "python": "python -c '...' or python script.py",
    "python3": "python3 -c '...' or python3 script.py",
    "ipython": "python -c '...' or python script.py",
    "node": "node -e '...' or node script.js",
    "irb": "ruby -e '...'",
    "psql": "psql -c 'SQL'",
    "mysql": "mysql -e 'SQL'",
    "sqlite3": "sqlite3 DB 'SQL'",
}
WRAPPERS = {"sudo", "env", "nohup", "time", "exec", "command", "nice", "stdbuf", "timeout", "xargs"}


def _simple_commands(command: str) -> list[tuple[list[str], bool]]:
    """Split a shell line into the words of each simple command, each with whether its stdin is
    a pipe (good enough for a blocklist; unparsable input is left to the shell to report)."""
    lexer = shlex.shlex(command.replace("\n", ";"), posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    commands: list[tuple[list[str], bool]] = [([], False)]
    try:
        for token in lexer:
            if token.strip(";&|()") == "":
                commands.append(([], token in ("|", "|&")))
            else:
                commands[-1][0].append(token)
    except ValueError:
        return []
    return [(words, piped) for words, piped in commands if words]


def _program(words: list[str]) -> tuple[str, list[str]]:
    """Skip `VAR=value` prefixes and wrappers such as `env`, `sudo`, `timeout 5`."""
    index = 0
    while index < len(words):
        word = words[index]
        name = word.rsplit("/", 1)[-1]
        if "=" in word and not word.startswith("-") and word.split("=", 1)[0].isidentifier():
            index += 1
        elif name in WRAPPERS:
            index += 1
            while index < len(words) and (
                words[index].startswith("-") or words[index].replace(".", "").isdigit()
            ):
                index += 1
        else:
            return name, words[index + 1 :]
    return "", []


def interactive_refusal(command: str) -> str | None:
    """A helpful refusal when `command` would start an interactive program, else None."""
    for words, piped in _simple_commands(command):
        program, args = _program(words)
        if not program:
            continue
        if program in INTERACTIVE:
            return f"`{program}` is interactive and there is no terminal. {INTERACTIVE[program]}"
        if program == "tail" and any(
            a in ("-f", "-F", "--follow") or a.startswith("--follow=") for a in args
        ):
            return (
                "`tail -f` never ends. Use `tail -n 50 FILE` and call the tool again to see "
                "new lines."
            )
        if program in REPLS and not piped and _starts_repl(program, args):
            return (
                f"`{program}` without a script or command opens an interactive prompt, and "
                f"there is no terminal. Use {REPLS[program]}."
            )
        if program == "git" and _interactive_git(args):
            return (
                "that git command opens an editor or asks questions. Use `git commit -m MSG`, "
                "`git add FILES`, `git rebase` without -i, `git log --oneline -n 20`."
            )
    return None


def _starts_repl(program: str, args: list[str]) -> bool:
    if program.startswith("python") or program == "ipython":
        if "-i" in args:
            return True
        runs_something = {"-c", "-m", "-"}
        return not any(a in runs_something or not a.startswith("-") for a in args)
    if program == "node":
        return not any(
            a in ("-e", "-p", "--eval", "--print") or not a.startswith("-") for a in args
        )
    if program in ("psql", "mysql"):
        return not any(a in ("-c", "-e", "-f", "--command", "--execute") for a in args)
    if program == "sqlite3":
        return len([a for a in args if not a.startswith("-")]) < 2
    return not args


def _interactive_git(args: list[str]) -> bool:
    if not args:
        return False
    sub, rest = args[0], args[1:]
    if sub == "rebase" and ("-i" in rest or "--interactive" in rest):
        return True
    if sub == "add" and any(a in ("-i", "-p", "--interactive", "--patch") for a in rest):
        return True
    message = ("-m", "-F", "--message", "--file", "--no-edit", "-C", "--reuse-message", "--amend")
    return sub == "commit" and not any(a.startswith(message) or a.startswith("-am") for a in rest)


def format_result(result: SandboxResult, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """stdout, then stderr under a header; head + tail when long."""
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    text = "\n".join(parts) if parts else "(no output)"
    return truncate_output(text, max_chars)


class ShellTool(Tool):
    name = "shell"
    description = (
        "Run a non-interactive shell command (/bin/sh) in the workspace and get its output. "
        "Sandboxed: files outside the workspace are read-only and the network is off unless "
        "the configuration allows it. No terminal: editors, pagers, REPLs and `tail -f` are "
        "refused. Long output is cut to its head and tail; narrow it with grep/head/tail."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line, run with /bin/sh."},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "Seconds before the command is killed (capped by the configuration).",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx

    @property
    def sandbox(self) -> Sandbox:
        return self.ctx.sandbox or default_sandbox()

    async def execute(self, command: str, timeout: float | None = None) -> ToolResult:
        if not command.strip():
            return ToolResult.failure("tool_call_invalid", "command is empty.")
        if self.ctx.command_filter is not None:
            refusal = self.ctx.command_filter(command)
            if refusal:
                return ToolResult.failure("command_not_allowed", refusal)
        refusal = interactive_refusal(command)
        if refusal:
            return ToolResult.failure("interactive_command", refusal)
        limit = self.ctx.timeout_seconds
        seconds = min(timeout, limit) if timeout else limit
        try:
            result = await self.sandbox.run(
                command,
                Path(self.ctx.root),
                network=self.ctx.network,
                writable=(self.ctx.root,),
                timeout=seconds,
            )
        except SandboxUnavailable as exc:
            return ToolResult.failure("sandbox_unavailable", str(exc))
        output = format_result(result)
        data = {
            "backend": result.backend,
            "duration": round(result.duration, 3),
            "exit_code": result.exit_code,
            "memory_cap": result.memory_cap,
            "timed_out": result.timed_out,
        }
        if result.memory_error:  # before the timeout: a killed child may leave the rest waiting
            return ToolResult.failure("memory_limit", result.memory_error, output, **data)
        if result.timed_out:
            capped = " (the configured maximum)" if timeout and timeout > limit else ""
            return ToolResult.failure(
                "command_timeout",
                f"the command was killed after {seconds:g} s{capped}. Run something shorter, "
                "narrow it down, or run long jobs in smaller steps.",
                output,
                **data,
            )
        if result.exit_code != 0:
            return ToolResult.failure(
                "command_failed", f"exit code {result.exit_code}", output, **data
            )
        return ToolResult.success(output, **data)
