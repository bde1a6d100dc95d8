"""The str_replace_editor tool: argument checks, and the commands that change files (create,
str_replace, insert_at_line); view, undo, mismatch diagnostics, lint and diff live beside it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from apps.engine.tools import Tool, ToolResult
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.editor.diff import unified_diff
from apps.tools.builtin.editor.lint import lint_delta, with_lint
from apps.tools.builtin.editor.mismatch import (
    find_all,
    line_of,
    mismatch,
    mostly_numbered,
    overlapping,
)
from apps.tools.builtin.editor.undo import UndoHistory
from apps.tools.builtin.editor.view import view
from apps.tools.builtin.paths import (
    MAX_FILE_BYTES,
    PathRefusedError,
    WorkspacePath,
    read_bytes,
    resolve_path,
    text_of,
    write_bytes,
)
from apps.tools.builtin.text import TextFile, numbered_window, split_lines

SNIPPET_BUDGET_CHARS = 3_000
SNIPPET_CONTEXT_LINES = 4

COMMAND_ARGUMENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # command: (required, optional) besides `command` and `path`
    "view": ((), ("view_range",)),
    "create": (("file_text",), ("overwrite",)),
    "str_replace": (("old_str", "new_str"), ("expected_count",)),
    "insert_at_line": (("insert_line", "new_str"), ()),
    "undo_edit": ((), ()),
}


class StrReplaceEditorTool(Tool):
    name = "str_replace_editor"
    description = (
        "View, create and edit text files in the workspace. Paths are relative to the workspace "
        "root. Commands:\n"
        "- view: a file with line numbers (view_range [start, end], end -1 = to the end; large "
        "files are shown in windows), or a directory two levels deep.\n"
        "- create: write file_text to a new file (parents are created); an existing file is only "
        "replaced with overwrite: true.\n"
        "- str_replace: replace old_str with new_str. old_str must match the file exactly, "
        "whitespace included, and exactly once: add surrounding lines to make it unique, or pass "
        "expected_count to replace that many occurrences. Never include the line numbers shown by "
        'view. Use new_str "" to delete.\n'
        "- insert_at_line: insert new_str after line insert_line (0 = at the top).\n"
        "- undo_edit: revert the last edit of path made by this tool (repeatable).\n"
        "Python edits report lint problems they introduce."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": ["view", "create", "str_replace", "insert_at_line", "undo_edit"],
                "description": "What to do.",
            },
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File or directory, relative to the workspace root.",
            },
            "file_text": {"type": "string", "description": "create: the whole file content."},
            "old_str": {
                "type": "string",
                "minLength": 1,
                "description": "str_replace: exact text to replace, copied from the file.",
            },
            "new_str": {
                "type": "string",
                "description": "str_replace: the replacement; insert_at_line: the lines to insert.",
            },
            "insert_line": {
                "type": "integer",
                "minimum": 0,
                "description": "insert_at_line: insert after this line (0 = at the top).",
            },
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
                "description": "view: [first line, last line], 1-based; last -1 = to the end.",
            },
            "expected_count": {
                "type": "integer",
                "minimum": 1,
                "description": "str_replace: replace exactly this many occurrences.",
            },
            "overwrite": {
                "type": "boolean",
                "description": "create: replace an existing file.",
            },
        },
        "required": ["command", "path"],
        "additionalProperties": False,
    }

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx
        self._history = UndoHistory()
        self._locks: dict[Path, asyncio.Lock] = {}

    async def execute(self, command: str, path: str, **arguments: Any) -> ToolResult:
        if command not in COMMAND_ARGUMENTS:
            return ToolResult.failure(
                "invalid_arguments",
                f"unknown command {command!r}; use one of {', '.join(COMMAND_ARGUMENTS)}.",
            )
        given = {key: value for key, value in arguments.items() if value is not None}
        required, optional = COMMAND_ARGUMENTS[command]
        missing = [name for name in required if name not in given]
        unused = sorted(set(given) - set(required) - set(optional))
        if missing or unused:
            takes = ", ".join([*required, *(f"{name}?" for name in optional)]) or "nothing else"
            problem = (
                f"{command} needs {', '.join(missing)}"
                if missing
                else f"{command} does not use {', '.join(unused)}"
            )
            return ToolResult.failure(
                "invalid_arguments", f"{problem}. {command} takes path and {takes}."
            )
        try:
            wp = await asyncio.to_thread(resolve_path, self.ctx.root, path, write=command != "view")
            if command == "view":
                return await asyncio.to_thread(view, wp, given.get("view_range"))
            lock = self._locks.setdefault(wp.path, asyncio.Lock())
            async with lock:
                if command == "create":
                    return await self._create(wp, given["file_text"], given.get("overwrite", False))
                if command == "str_replace":
                    return await self._str_replace(
                        wp, given["old_str"], given["new_str"], given.get("expected_count")
                    )
                if command == "insert_at_line":
                    return await self._insert(wp, given["insert_line"], given["new_str"])
                return await asyncio.to_thread(self._history.undo, wp)
        except PathRefusedError as exc:
            return exc.result()

    # --- create ----------------------------------------------------------------------------

    async def _create(self, wp: WorkspacePath, file_text: str, overwrite: bool) -> ToolResult:
        existing = await asyncio.to_thread(_existing_for_create, wp, overwrite)
        if isinstance(existing, ToolResult):
            return existing
        before, old = existing
        if old is not None:
            # Replacing a file keeps its conventions: encoding, BOM, CRLF.
            if old.crlf and "\r\n" not in file_text:
                file_text = file_text.replace("\n", "\r\n")
            elif "\r\n" not in old.text:
                file_text = file_text.replace("\r\n", "\n")
            target = old
        else:
            target = TextFile("", "utf-8")
        data = _encode(wp, target, file_text)
        if isinstance(data, ToolResult):
            return data
        created = await asyncio.to_thread(write_bytes, wp, data)
        self._history.remember(wp, "create", before, data, tuple(created))
        total = len(split_lines(file_text))
        verb = "Overwrote" if before is not None else "Created"
        output = f"{verb} {wp.shown} ({total} lines)."
        lint = await self._lint(wp, old.text if old is not None else None, file_text)
        diff = unified_diff(wp.shown, old.text if old is not None else "", file_text)
        return with_lint(
            ToolResult.success(output, path=wp.shown, total_lines=total, diff=diff), lint
        )

    # --- str_replace -----------------------------------------------------------------------

    async def _str_replace(
        self, wp: WorkspacePath, old_str: str, new_str: str, expected_count: int | None
    ) -> ToolResult:
        before, source = await asyncio.to_thread(_load, wp)
        crlf = source.crlf
        text = source.text.replace("\r\n", "\n") if crlf else source.text
        if crlf or "\r\n" not in text:  # the file's line endings win over the model's
            old_str, new_str = old_str.replace("\r\n", "\n"), new_str.replace("\r\n", "\n")
        if old_str == new_str:
            return ToolResult.failure(
                "no_change", "old_str and new_str are identical; there is nothing to replace."
            )
        positions = find_all(text, old_str)
        wanted = expected_count or 1
        if len(positions) != wanted:
            return mismatch(wp, text, old_str, positions, expected_count)
        if overlapping(positions, len(old_str)):
            return ToolResult.failure(
                "old_str_overlapping",
                f"the {len(positions)} occurrences of old_str in {wp.shown} overlap, so replacing "
                f"them is ambiguous; use a longer old_str.",
            )
        updated = text.replace(old_str, new_str)
        first_line = line_of(text, positions[0])
        last_start = positions[-1] + (len(new_str) - len(old_str)) * (len(positions) - 1)
        last_line = line_of(updated, last_start + max(len(new_str) - 1, 0))
        result = await self._write_edit(
            wp, "str_replace", source, before, text, updated, crlf, first_line, last_line
        )
        if result.ok:
            count = len(positions)
            result.output = (
                f"Replaced {count} occurrence{'s' if count > 1 else ''} in {wp.shown}. "
                + result.output
            )
            if mostly_numbered(new_str):
                result.output += (
                    "\nWarning: the lines of new_str start with line numbers like view shows "
                    "them; they were written into the file as given. undo_edit if that was not "
                    "intended."
                )
            result.data["replacements"] = count
        return result

    # --- insert_at_line --------------------------------------------------------------------

    async def _insert(self, wp: WorkspacePath, insert_line: int, new_str: str) -> ToolResult:
        before, source = await asyncio.to_thread(_load, wp)
        crlf = source.crlf
        text = source.text.replace("\r\n", "\n") if crlf else source.text
        if crlf or "\r\n" not in text:
            new_str = new_str.replace("\r\n", "\n")
        lines = _split_keepends(text)
        total = len(lines)
        if insert_line > total:
            return ToolResult.failure(
                "insert_line_out_of_range",
                f"insert_line {insert_line} is beyond the end of {wp.shown}, which has {total} "
                f"lines; use 0..{total} (0 = at the top, {total} = at the end).",
                total_lines=total,
            )
        if not new_str:
            return ToolResult.failure("no_change", "new_str is empty; there is nothing to insert.")
        block = new_str if new_str.endswith("\n") else new_str + "\n"
        head, tail = lines[:insert_line], lines[insert_line:]
        if head and not head[-1].endswith("\n"):
            head[-1] += "\n"  # inserting after a last line that had no newline
            if not tail:
                block = block[:-1]  # ... and the file still ends without one
        updated = "".join(head) + block + "".join(tail)
        inserted = len(split_lines(block)) or 1
        result = await self._write_edit(
            wp,
            "insert_at_line",
            source,
            before,
            text,
            updated,
            crlf,
            insert_line + 1,
            insert_line + inserted,
        )
        if result.ok:
            result.output = (
                f"Inserted {inserted} line{'s' if inserted > 1 else ''} after line "
                f"{insert_line} of {wp.shown}. " + result.output
            )
        return result

    async def _write_edit(
        self,
        wp: WorkspacePath,
        command: str,
        source: TextFile,
        before: bytes,
        old_text: str,
        new_text: str,
        crlf: bool,
        first_line: int,
        last_line: int,
    ) -> ToolResult:
        data = _encode(wp, source, new_text.replace("\n", "\r\n") if crlf else new_text)
        if isinstance(data, ToolResult):
            return data
        await asyncio.to_thread(write_bytes, wp, data)
        self._history.remember(wp, command, before, data, ())
        lines = split_lines(new_text)
        first = max(1, first_line - SNIPPET_CONTEXT_LINES)
        last = min(len(lines), max(last_line, first_line) + SNIPPET_CONTEXT_LINES)
        snippet, _ = numbered_window(lines, first, last, budget=SNIPPET_BUDGET_CHARS)
        output = (
            f"Lines {first}-{last} now read:\n{snippet}\n"
            "Check the result; undo_edit reverts this edit."
            if lines
            else f"{wp.shown} is now empty."
        )
        lint = await self._lint(wp, old_text, new_text)
        return with_lint(
            ToolResult.success(
                output,
                path=wp.shown,
                lines=[first_line, last_line],
                total_lines=len(lines),
                diff=unified_diff(wp.shown, old_text, new_text),
            ),
            lint,
        )

    async def _lint(self, wp: WorkspacePath, before: str | None, after: str) -> list[dict] | None:
        if wp.path.suffix not in (".py", ".pyi"):
            return None
        return await lint_delta(wp.root, wp.shown, before, after)


# --- helpers -------------------------------------------------------------------------------------


def _existing_for_create(
    wp: WorkspacePath, overwrite: bool
) -> tuple[bytes | None, TextFile | None] | ToolResult:
    """What `create` would replace: (None, None) for a new file, the old bytes and text when
    overwriting, or the refusal."""
    if wp.is_dir():
        return ToolResult.failure(
            "is_a_directory", f"{wp.shown} is a directory; give a file path to create."
        )
    if not wp.exists():
        return None, None
    if not overwrite:
        return ToolResult.failure(
            "file_exists",
            f"{wp.shown} already exists. Change part of it with str_replace or insert_at_line, "
            f"or pass overwrite: true to replace it entirely.",
        )
    return _load(wp)


def _load(wp: WorkspacePath) -> tuple[bytes, TextFile]:
    data = read_bytes(wp)  # read once: the bytes undo restores are the text that was edited
    return data, text_of(wp, data)


def _encode(wp: WorkspacePath, target: TextFile, text: str) -> bytes | ToolResult:
    try:
        data = target.encode(text)
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        return ToolResult.failure(
            "encoding_error",
            f"{wp.shown} is {target.encoding}-encoded and {bad!r} cannot be written in that "
            f"encoding; use characters it can represent (or an escape sequence).",
        )
    if len(data) > MAX_FILE_BYTES:
        return ToolResult.failure(
            "file_too_large",
            f"the result would be {len(data) / 1_048_576:.1f} MB, over the "
            f"{MAX_FILE_BYTES // 1_048_576} MB limit of file tools.",
        )
    return data


def _split_keepends(text: str) -> list[str]:
    """Lines with their "\\n" (only "\\n" ends a line, as in split_lines)."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines
