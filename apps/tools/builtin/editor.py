"""`str_replace_editor`: view, create and edit files inside the workspace.

Edits are anchored on exact text, because line numbers go stale the moment a file changes:
`str_replace` replaces `old_str` only when it occurs exactly once (or exactly `expected_count`
times), and when it does not, the error says why in a way the model can act on: the line numbers
of every match, the closest lines ("did you mean"), a whitespace difference, or line numbers pasted
from view output. `new_str` is written byte-for-byte.

The file keeps its encoding, BOM and line endings (a CRLF file is edited as text with "\\n" and
written back with CRLF). Binary files and files over 10 MB are refused. After an edit of a Python
file, the problems `ruff check` finds in the new content but not in the old are reported.

The instance holds each file's undo history, so a run uses one instance: `undo_edit` restores the
content before the last edit of that file by this tool, repeatedly, a `create` included.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import re
import shutil
import stat
import sys
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from apps.engine.tools import Tool, ToolResult
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.paths import (
    MAX_FILE_BYTES,
    PathRefusedError,
    TextFile,
    WorkspacePath,
    delete_file,
    numbered_window,
    read_bytes,
    read_text,
    resolve_path,
    split_lines,
    text_of,
    write_bytes,
)

VIEW_BUDGET_CHARS = 9_000  # under the ToolSet's 10,000-character cap, so we window, not it
SNIPPET_BUDGET_CHARS = 3_000
SNIPPET_CONTEXT_LINES = 4
LISTING_MAX_ENTRIES = 400
LISTING_MAX_PER_DIR = 100
UNDO_DEPTH = 20
LINT_TIMEOUT_SECONDS = 20.0

COMMAND_ARGUMENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # command: (required, optional) besides `command` and `path`
    "view": ((), ("view_range",)),
    "create": (("file_text",), ("overwrite",)),
    "str_replace": (("old_str", "new_str"), ("expected_count",)),
    "insert_at_line": (("insert_line", "new_str"), ()),
    "undo_edit": ((), ()),
}

# "    12\t" from view/read_file output, or "12: " / "12 | " from other tools, at a line start
_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+(?:\t| ?[:|│] )")


@dataclass(frozen=True)
class _Snapshot:
    command: str
    before: bytes | None  # None: the file did not exist
    after: bytes
    created_dirs: tuple[str, ...]


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
        self._history: dict[Path, list[_Snapshot]] = {}
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
                return await asyncio.to_thread(self._view, wp, given.get("view_range"))
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
                return await asyncio.to_thread(self._undo, wp)
        except PathRefusedError as exc:
            return exc.result()

    # --- view ------------------------------------------------------------------------------

    def _view(self, wp: WorkspacePath, view_range: list[int] | None) -> ToolResult:
        if wp.is_dir():
            if view_range is not None:
                return ToolResult.failure(
                    "invalid_arguments", f"{wp.shown} is a directory; view_range is for files."
                )
            return _list_directory(wp)
        text = read_text(wp)
        lines = split_lines(text.text)
        total = len(lines)
        if total == 0:
            return ToolResult.success(f"{wp.shown} is empty.", path=wp.shown, total_lines=0)
        first, last = 1, total
        if view_range is not None:
            first, last = view_range
            if last == -1:
                last = total
            if first < 1 or first > total or last < first:
                return ToolResult.failure(
                    "invalid_view_range",
                    f"view_range {view_range} does not fit {wp.shown}, which has {total} lines: "
                    f"use [first, last] with 1 <= first <= last <= {total} (last -1 = to the end).",
                )
        notes = []
        if last > total:
            notes.append(f"[{wp.shown} has {total} lines; showing up to line {total}.]")
            last = total
        body, shown_last = numbered_window(lines, first, last, budget=VIEW_BUDGET_CHARS)
        if shown_last < last:
            notes.append(
                f"[Showing lines {first}-{shown_last} of {total}. Continue with view_range "
                f"[{shown_last + 1}, {last if last < total else -1}], or read one definition with "
                f"read_file(symbol=...).]"
            )
        output = body + ("\n" + "\n".join(notes) if notes else "")
        return ToolResult.success(
            output,
            path=wp.shown,
            total_lines=total,
            lines=[first, shown_last],
            windowed=shown_last < last,
        )

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
        self._remember(wp, "create", before, data, tuple(created))
        total = len(split_lines(file_text))
        verb = "Overwrote" if before is not None else "Created"
        output = f"{verb} {wp.shown} ({total} lines)."
        lint = await self._lint(wp, old.text if old is not None else None, file_text)
        diff = unified_diff(wp.shown, old.text if old is not None else "", file_text)
        return _with_lint(
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
        positions = _find_all(text, old_str)
        wanted = expected_count or 1
        if len(positions) != wanted:
            return _mismatch(wp, text, old_str, positions, expected_count)
        if _overlapping(positions, len(old_str)):
            return ToolResult.failure(
                "old_str_overlapping",
                f"the {len(positions)} occurrences of old_str in {wp.shown} overlap, so replacing "
                f"them is ambiguous; use a longer old_str.",
            )
        updated = text.replace(old_str, new_str)
        first_line = _line_of(text, positions[0])
        last_start = positions[-1] + (len(new_str) - len(old_str)) * (len(positions) - 1)
        last_line = _line_of(updated, last_start + max(len(new_str) - 1, 0))
        result = await self._write_edit(
            wp, "str_replace", source, before, text, updated, crlf, first_line, last_line
        )
        if result.ok:
            count = len(positions)
            result.output = (
                f"Replaced {count} occurrence{'s' if count > 1 else ''} in {wp.shown}. "
                + result.output
            )
            if _mostly_numbered(new_str):
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

    # --- undo_edit -------------------------------------------------------------------------

    def _undo(self, wp: WorkspacePath) -> ToolResult:
        history = self._history.get(wp.path)
        if not history:
            return ToolResult.failure(
                "no_edit_history",
                f"there is no edit of {wp.shown} by str_replace_editor to undo (undo_edit only "
                f"reverts this tool's own edits in this run).",
            )
        snapshot = history[-1]
        warning = ""
        try:
            current = read_bytes(wp)
        except PathRefusedError:
            current = None
        if current != snapshot.after:
            warning = (
                " Note: the file had been changed since that edit by something else; those "
                "changes are gone too."
            )
        if snapshot.before is None:
            delete_file(wp, remove_dirs=snapshot.created_dirs)
            what = f"Removed {wp.shown}, which the undone create had made."
        else:
            write_bytes(wp, snapshot.before)
            what = f"Restored {wp.shown} to its content before the last {snapshot.command}."
        history.pop()  # only once the file is restored: a failed undo can be retried
        left = len(history)
        more = (
            f" {left} earlier edit{'s' if left != 1 else ''} of it can still be undone."
            if left
            else ""
        )
        return ToolResult.success(
            what + more + warning, path=wp.shown, undone=snapshot.command, undo_left=left
        )

    # --- shared ----------------------------------------------------------------------------

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
        self._remember(wp, command, before, data, ())
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
        return _with_lint(
            ToolResult.success(
                output,
                path=wp.shown,
                lines=[first_line, last_line],
                total_lines=len(lines),
                diff=unified_diff(wp.shown, old_text, new_text),
            ),
            lint,
        )

    def _remember(
        self,
        wp: WorkspacePath,
        command: str,
        before: bytes | None,
        after: bytes,
        created_dirs: tuple[str, ...],
    ) -> None:
        history = self._history.setdefault(wp.path, [])
        history.append(_Snapshot(command, before, after, created_dirs))
        del history[:-UNDO_DEPTH]

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


def _find_all(text: str, needle: str, limit: int = 100_000) -> list[int]:
    """Start positions of needle, overlapping ones included (at most `limit`)."""
    positions = []
    start = text.find(needle)
    while start >= 0 and len(positions) < limit:
        positions.append(start)
        start = text.find(needle, start + 1)
    return positions


def _lines_of(text: str, positions: list[int]) -> list[int]:
    """Line numbers of sorted positions, counting newlines once across the text."""
    lines, line, previous = [], 1, 0
    for position in positions:
        line += text.count("\n", previous, position)
        previous = position
        lines.append(line)
    return lines


def _list_lines(line_numbers: list[int], most: int = 40) -> str:
    """ "3, 7×2, 12" for matches on lines 3, 7, 7, 12; long lists are cut."""
    counts = Counter(line_numbers)
    shown = [f"{n}×{c}" if c > 1 else str(n) for n, c in sorted(counts.items())]
    if len(shown) > most:
        return ", ".join(shown[:most]) + f", ... ({len(shown) - most} more lines)"
    return ", ".join(shown)


def _overlapping(positions: list[int], length: int) -> bool:
    return any(b - a < length for a, b in pairwise(positions))


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def _mostly_numbered(text: str) -> bool:
    lines = [line for line in text.split("\n") if line.strip()]
    numbered = sum(1 for line in lines if _LINE_NUMBER_PREFIX.match(line))
    return bool(lines) and numbered * 2 >= len(lines)


def _strip_line_numbers(text: str) -> str:
    return "\n".join(_LINE_NUMBER_PREFIX.sub("", line, count=1) for line in text.split("\n"))


def _mismatch(
    wp: WorkspacePath,
    text: str,
    old_str: str,
    positions: list[int],
    expected_count: int | None,
) -> ToolResult:
    lines_of = _lines_of(text, positions)
    listed = _list_lines(lines_of)
    if expected_count is not None and positions:
        return ToolResult.failure(
            "old_str_count_mismatch",
            f"old_str occurs {len(positions)} time{'s' if len(positions) > 1 else ''} in "
            f"{wp.shown} (at line{'s' if len(positions) > 1 else ''} {listed}), not "
            f"{expected_count}; nothing was changed.",
            match_lines=lines_of[:1000],
        )
    if positions:
        return ToolResult.failure(
            "old_str_not_unique",
            f"old_str occurs {len(positions)} times in {wp.shown}, at lines {listed}; nothing was "
            f"changed. Include more surrounding lines in old_str so it matches only the place you "
            f"mean, or pass expected_count={len(positions)} to replace all of them.",
            match_lines=lines_of[:1000],
        )
    return ToolResult.failure(
        "old_str_not_found",
        f"old_str was not found in {wp.shown}; nothing was changed. "
        + _diagnose_not_found(text, old_str),
    )


def _diagnose_not_found(text: str, old_str: str) -> str:
    lines = split_lines(text)
    hints: list[str] = []
    if _mostly_numbered(old_str):
        stripped = _strip_line_numbers(old_str)
        again = _find_all(text, stripped) if stripped.strip() else []
        hint = (
            "old_str starts its lines with line numbers (like '    12\\t'), which view and "
            "read_file show but which are not part of the file. Remove them"
        )
        if len(again) == 1:
            line = _line_of(text, again[0])
            return hint + f"; without them old_str matches exactly once, at line {line}."
        hints.append(hint + ".")
        old_str = stripped
    whitespace = _whitespace_match(lines, old_str)
    if whitespace is not None:
        first, last, detail = whitespace
        excerpt, _ = numbered_window(lines, first, last, budget=2_000)
        hints.append(
            f"It matches lines {first}-{last} if whitespace is ignored: {detail}. Copy the text "
            f"exactly, every space and tab, as it is in the file:\n{excerpt}"
        )
        return " ".join(hints)
    closest = _closest_lines(lines, old_str)
    if closest is not None:
        first, last = closest
        excerpt, _ = numbered_window(lines, first, last, budget=2_000)
        hints.append(
            f"Did you mean lines {first}-{last}?\n{excerpt}\nCheck the differences, including "
            f"whitespace and indentation; view the file to copy the exact text."
        )
    else:
        hints.append(
            "No similar lines either: view the file (or search for a distinctive word) and copy "
            "the exact text, whitespace included."
        )
    return " ".join(hints)


def _whitespace_match(lines: list[str], old_str: str) -> tuple[int, int, str] | None:
    """Where old_str matches line by line once whitespace is normalised, and what differs."""
    wanted = [" ".join(line.split()) for line in old_str.strip("\n").split("\n")]
    if not any(wanted) or len(lines) > 200_000:
        return None
    normalised = [" ".join(line.split()) for line in lines]
    size = len(wanted)
    for start in range(len(lines) - size + 1):
        window = normalised[start : start + size]
        if not _lines_contain(window, wanted):
            continue
        original = lines[start : start + size]
        given = old_str.strip("\n").split("\n")
        return start + 1, start + size, _whitespace_difference(original, given)
    return None


def _lines_contain(window: list[str], wanted: list[str]) -> bool:
    """The old_str lines may start mid-line (first) and end mid-line (last)."""
    if len(wanted) == 1:
        return bool(wanted[0]) and wanted[0] in window[0]
    if not window[0].endswith(wanted[0]) or not window[-1].startswith(wanted[-1]):
        return False
    return window[1:-1] == wanted[1:-1]


def _whitespace_difference(original: list[str], given: list[str]) -> str:
    file_tabs = any(line[: len(line) - len(line.lstrip())].count("\t") for line in original)
    given_tabs = any(line[: len(line) - len(line.lstrip())].count("\t") for line in given)
    if file_tabs != given_tabs:
        return (
            "the file indents with tabs and old_str with spaces"
            if file_tabs
            else "the file indents with spaces and old_str with tabs"
        )
    if any(line.rstrip("\r") != line.rstrip() for line in original):
        return "the file has trailing whitespace on some of these lines"
    if any(line != line.rstrip() for line in given):
        return "old_str has trailing whitespace the file does not have"

    def indents(block: list[str]) -> list[int]:
        return [len(line) - len(line.lstrip()) for line in block if line.strip()]

    if indents(original) != indents(given):
        return "the indentation differs"
    return "spaces inside the lines differ"


def _closest_lines(lines: list[str], old_str: str) -> tuple[int, int] | None:
    wanted = old_str.strip("\n").split("\n")
    anchor_index, anchor = max(enumerate(wanted), key=lambda item: len(item[1].strip()))
    anchor = anchor.strip()
    if not anchor or not lines:
        return None
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(anchor)
    scored = []
    for index, line in enumerate(lines[:100_000]):
        matcher.set_seq1(line.strip())
        if matcher.real_quick_ratio() < 0.5 or matcher.quick_ratio() < 0.5:
            continue
        ratio = matcher.ratio()
        if ratio >= 0.5:
            scored.append((ratio, -index))
    best: tuple[float, int] | None = None
    target = "\n".join(line.strip() for line in wanted)
    for _, negative_index in sorted(scored, reverse=True)[:8]:
        start = max(0, -negative_index - anchor_index)
        window = lines[start : start + len(wanted)]
        ratio = difflib.SequenceMatcher(
            None, "\n".join(line.strip() for line in window), target, autojunk=False
        ).ratio()
        if best is None or ratio > best[0]:
            best = (ratio, start)
    if best is None or best[0] < 0.6:
        return None
    start = best[1]
    return start + 1, min(len(lines), start + len(wanted))


def _list_directory(wp: WorkspacePath) -> ToolResult:
    entries: list[str] = []
    omitted = 0

    def walk(directory: Path, relative: str, depth: int) -> None:
        nonlocal omitted
        try:
            with os.scandir(directory) as scan:
                children = sorted(
                    (entry for entry in scan if not entry.name.startswith(".")),
                    key=lambda entry: entry.name,
                )
        except OSError:
            return
        for count, entry in enumerate(children):
            if count >= LISTING_MAX_PER_DIR or len(entries) >= LISTING_MAX_ENTRIES:
                omitted += len(children) - count
                return
            child = f"{relative}/{entry.name}" if relative != "." else entry.name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                entries.append("  " * depth + child + "@")
            elif stat.S_ISDIR(mode):
                entries.append("  " * depth + child + "/")
                if depth == 0:
                    walk(Path(entry.path), child, depth + 1)
            else:
                entries.append("  " * depth + child)

    walk(wp.path, wp.shown, 0)
    heading = (
        f"Files and directories in {wp.shown}, two levels deep, hidden ones left out "
        f"(directories end in /, links in @):"
    )
    body = "\n".join(entries) if entries else "(empty)"
    note = (
        f"\n[{omitted} more entries not listed; view a subdirectory, or use search(glob=...)]"
        if omitted
        else ""
    )
    return ToolResult.success(
        f"{heading}\n{body}{note}", path=wp.shown, entries=len(entries), omitted=omitted
    )


# --- lint delta ----------------------------------------------------------------------------------


def find_ruff() -> str | None:
    """The ruff next to this interpreter (the project venv), else the one on PATH."""
    beside = Path(sys.executable).with_name("ruff")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("ruff")


async def lint_delta(
    root: Path, shown: str, before: str | None, after: str
) -> list[dict[str, Any]] | None:
    """The ruff problems of `after` that `before` did not have (matched by code, message and
    line text, so problems that only moved are not new). None when ruff cannot run."""
    ruff = find_ruff()
    if ruff is None:
        return None
    runs = [_ruff_check(ruff, root, shown, after)]
    if before:
        runs.append(_ruff_check(ruff, root, shown, before))
    results = await asyncio.gather(*runs)
    if any(result is None for result in results):
        return None
    after_problems = results[0] or []
    before_problems = results[1] if len(results) > 1 else []
    old = Counter(_problem_key(p, before or "") for p in before_problems or [])
    new = []
    for problem in after_problems:
        key = _problem_key(problem, after)
        if old[key] > 0:
            old[key] -= 1
            continue
        location = problem.get("location") or {}
        new.append(
            {
                "code": problem.get("code") or "syntax-error",
                "message": problem.get("message", ""),
                "line": location.get("row"),
                "column": location.get("column"),
            }
        )
    return new


def _problem_key(problem: dict[str, Any], text: str) -> tuple[str, str, str]:
    row = (problem.get("location") or {}).get("row") or 0
    lines = text.split("\n")
    line = lines[row - 1].strip() if 0 < row <= len(lines) else ""
    return problem.get("code") or "syntax-error", problem.get("message", ""), line


async def _ruff_check(ruff: str, root: Path, shown: str, text: str) -> list[dict] | None:
    try:
        process = await asyncio.create_subprocess_exec(
            ruff,
            "check",
            "--output-format=json",
            "--exit-zero",
            "--no-cache",
            "--stdin-filename",
            shown,
            "-",
            cwd=root,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError:
        return None
    try:
        stdout, _ = await asyncio.wait_for(
            process.communicate(text.encode("utf-8", errors="surrogatepass")),
            LINT_TIMEOUT_SECONDS,
        )
    except TimeoutError:
        process.kill()
        await process.wait()
        return None
    if process.returncode != 0:
        return None  # e.g. an invalid ruff configuration in the workspace
    try:
        problems = json.loads(stdout or b"[]")
    except json.JSONDecodeError:
        return None
    return problems if isinstance(problems, list) else None


MAX_DIFF_CHARS = 20_000


def unified_diff(shown: str, before: str, after: str) -> str:
    """The edit as a unified diff, for people (the chat's diff view); the model gets the
    numbered snippet instead. Capped so a huge rewrite cannot bloat the event log."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{shown}",
        tofile=f"b/{shown}",
        n=2,
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + f"\n... diff cut at {MAX_DIFF_CHARS} characters\n"
    return text


def _with_lint(result: ToolResult, lint: list[dict] | None) -> ToolResult:
    if lint is None:
        return result
    result.data["lint"] = lint
    if lint:
        shown = result.data.get("path", "")
        listed = "\n".join(
            f"  {shown}:{p['line']}:{p['column']}: {p['code']} {p['message']}" for p in lint[:20]
        )
        more = f"\n  ... and {len(lint) - 20} more" if len(lint) > 20 else ""
        result.output += (
            f"\n\nruff: this edit introduced {len(lint)} new problem"
            f"{'s' if len(lint) > 1 else ''}:\n{listed}{more}"
        )
    return result
