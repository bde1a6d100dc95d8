"""`view`: a file with line numbers (windowed under the output cap), or a directory listing."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from apps.engine.tools import ToolResult
from apps.tools.builtin.paths import WorkspacePath, read_text
from apps.tools.builtin.text import numbered_window, split_lines

VIEW_BUDGET_CHARS = 9_000  # under the ToolSet's 10,000-character cap, so we window, not it
LISTING_MAX_ENTRIES = 400
LISTING_MAX_PER_DIR = 100


def view(wp: WorkspacePath, view_range: list[int] | None) -> ToolResult:
    """A file with line numbers, in windows; a directory two levels deep."""
    if wp.is_dir():
        if view_range is not None:
            return ToolResult.failure(
                "invalid_arguments", f"{wp.shown} is a directory; view_range is for files."
            )
        return list_directory(wp)
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


def list_directory(wp: WorkspacePath) -> ToolResult:
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
