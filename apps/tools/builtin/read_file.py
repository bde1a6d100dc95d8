"""`read_file`: a text file with line numbers, or only the definition the model asks for.

`symbol="name"` or `symbol="Class.method"` returns that definition's lines, with its decorators
and the comment block right above it (a Python docstring is inside the definition anyway), which
is what makes reading one method of a 5,000-line module cost a few hundred tokens instead of
tens of thousands. An ambiguous name returns the first match and lists the others; an unknown
one is an error listing the file's symbols. `start_line` / `end_line` narrow either result.
Files in languages without a symbol extractor are returned whole, with a note. Large results are
shown in windows with a note that says how to continue.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from apps.engine.tools import Tool, ToolResult
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.paths import PathRefusedError, WorkspacePath, read_bytes, resolve_path
from apps.tools.builtin.symbols import (
    CONTAINER_KINDS,
    SymbolSpan,
    extract_symbols,
    language_for_path,
    leading_comment_start,
    supported_languages_phrase,
)
from apps.tools.builtin.text import decode_text, numbered_window, split_lines

READ_BUDGET_CHARS = 9_500  # whole output, under the ToolSet's 10,000-character cap
LIST_BUDGET_CHARS = 1_500  # for symbol lists inside notes and errors
SYMBOL_CACHE_SIZE = 32


@dataclass(frozen=True)
class _Target:
    """The lines a read returns before start_line / end_line narrow them."""

    first: int
    last: int
    chosen: SymbolSpan | None = None
    notes: tuple[str, ...] = ()
    members: tuple[SymbolSpan, ...] = ()

    @property
    def what(self) -> str:
        return f"{self.chosen.kind} {self.chosen.qualified_name}" if self.chosen else "the file"


class ReadFileTool(Tool):
    name = "read_file"
    description = (
        "Read a text file with line numbers. To read one definition instead of a whole file, "
        "pass symbol: a function or class name, or 'Class.method' "
        f"({supported_languages_phrase()}); you get its lines with decorators and the comment "
        "above it, far cheaper than the whole file. start_line / end_line (1-based, inclusive) "
        "narrow the result further. Large files are shown in windows; the note says how to "
        "continue. The line numbers are not part of the file: leave them out of edits."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "File path, relative to the workspace root.",
            },
            "symbol": {
                "type": "string",
                "minLength": 1,
                "description": "A definition to read: 'name' or 'Class.method'.",
            },
            "start_line": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to show (1-based).",
            },
            "end_line": {
                "type": "integer",
                "minimum": 1,
                "description": "Last line to show (inclusive).",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx
        self._symbol_cache: dict[tuple[bytes, str], list[SymbolSpan]] = {}
        self._cache_lock = threading.Lock()  # reads run in worker threads

    async def execute(
        self,
        path: str,
        symbol: str | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
    ) -> ToolResult:
        if start_line is not None and end_line is not None and end_line < start_line:
            return ToolResult.failure(
                "invalid_line_range",
                f"end_line {end_line} is before start_line {start_line}.",
            )
        try:
            wp = await asyncio.to_thread(resolve_path, self.ctx.root, path)
            return await asyncio.to_thread(self._read, wp, symbol, start_line, end_line)
        except PathRefusedError as exc:
            if exc.error_code == "file_not_found":
                exc.message += await asyncio.to_thread(_similar_paths, self.ctx.root, path)
            return exc.result()

    def _read(
        self,
        wp: WorkspacePath,
        symbol: str | None,
        start_line: int | None,
        end_line: int | None,
    ) -> ToolResult:
        if wp.is_dir():
            return ToolResult.failure(
                "is_a_directory",
                f"{wp.shown} is a directory; list it with str_replace_editor view, or find "
                f"files with search(glob=...).",
            )
        data = read_bytes(wp)
        decoded = decode_text(data)
        if decoded is None:
            return ToolResult.failure(
                "binary_file", f"{wp.shown} is a binary file; read_file only reads text."
            )
        lines = split_lines(decoded.text)
        total = len(lines)
        language = language_for_path(wp.shown)
        info: dict[str, Any] = {"path": wp.shown, "total_lines": total, "language": language}
        target = _Target(first=1, last=total)
        if symbol is not None:
            selected = self._select(wp, data, decoded.text, lines, language, symbol, info)
            if isinstance(selected, ToolResult):
                return selected
            target = selected
        if total == 0:
            return ToolResult.success(f"[{wp.shown} is empty]", **info)
        if start_line is not None and start_line > total:
            return ToolResult.failure(
                "line_out_of_range",
                f"start_line {start_line} is beyond the end of {wp.shown}, which has {total} lines.",
            )
        first = max(target.first, start_line or target.first)
        last = min(target.last, end_line or target.last)
        if first > last:
            return ToolResult.failure(
                "line_out_of_range",
                f"lines {start_line or target.first}-{end_line or target.last} are outside "
                f"{target.what} (lines {target.first}-{target.last}).",
            )
        notes = list(target.notes)
        # Leave room for the header and notes so the whole output stays under the budget.
        budget = READ_BUDGET_CHARS - 200 - sum(len(note) + 1 for note in notes)
        body, shown_last = numbered_window(lines, first, last, budget=budget)
        if shown_last < last:  # the continuation note may list up to LIST_BUDGET_CHARS of symbols
            budget -= LIST_BUDGET_CHARS + 300
            body, shown_last = numbered_window(lines, first, last, budget=budget)
            notes.append(
                self._continuation(target, first, shown_last, data, decoded.text, language)
            )
        info["lines"] = [first, shown_last]
        info["windowed"] = shown_last < last
        label = f"{target.what}, lines" if target.chosen is not None else "lines"
        header = f"[{wp.shown}: {label} {first}-{shown_last} of {total}]"
        if target.chosen is None and first == 1 and shown_last == total:
            header = f"[{wp.shown}: all {total} lines]"  # the whole file, said plainly
        return ToolResult.success("\n".join([header, body, *notes]), **info)

    def _select(
        self,
        wp: WorkspacePath,
        data: bytes,
        text: str,
        lines: list[str],
        language: str | None,
        symbol: str,
        info: dict[str, Any],
    ) -> _Target | ToolResult:
        """The lines of the definition `symbol` names (with its decorators and the comment block
        above it), or the whole file with a note when the language has no extractor."""
        if language is None:
            suffix = PurePosixPath(wp.shown).suffix or "extension-less"
            info["symbol_supported"] = False
            return _Target(
                first=1,
                last=len(lines),
                notes=(
                    f"[Symbols cannot be looked up in {suffix} files; showing the whole file.]",
                ),
            )
        symbols = self._symbols(data, text, language)
        matches = find_symbol(symbols, symbol)
        if not matches:
            return _symbol_not_found(wp, symbol, symbols)
        chosen = matches[0]
        first = leading_comment_start(lines, chosen.first_line, language)
        info["symbol"] = {
            "name": chosen.qualified_name,
            "kind": chosen.kind,
            "start_line": first,
            "end_line": chosen.end_line,
        }
        notes: tuple[str, ...] = ()
        if len(matches) > 1:
            notes = (
                f"[{symbol!r} matches {len(matches)} definitions; showing the first. Others: "
                f"{_format_symbols(matches[1:])}. Pick one with its qualified name, e.g. "
                f"symbol='{matches[1].qualified_name}'.]",
            )
            info["other_matches"] = [
                {"name": s.qualified_name, "start_line": s.start_line, "end_line": s.end_line}
                for s in matches[1:]
            ]
        members = tuple(s for s in symbols if s.parent == chosen.qualified_name)
        return _Target(first, chosen.end_line, chosen, notes, members)

    def _continuation(
        self,
        target: _Target,
        first: int,
        shown_last: int,
        data: bytes,
        text: str,
        language: str | None,
    ) -> str:
        """The note under a windowed result: where to continue, and smaller pieces to read."""
        note = (
            f"[Showing lines {first}-{shown_last} of {target.what} (lines {target.first}-"
            f"{target.last}). Continue with start_line={shown_last + 1}"
        )
        if target.chosen is not None and target.chosen.kind in CONTAINER_KINDS and target.members:
            note += f", or read one member: {_format_symbols(list(target.members))}"
        elif target.chosen is None and language is not None:
            outline = [s for s in self._symbols(data, text, language) if not s.local]
            if outline:
                note += f", or read one definition with symbol=...: {_format_symbols(outline)}"
        return note + ".]"

    def _symbols(self, data: bytes, text: str, language: str) -> list[SymbolSpan]:
        key = (hashlib.blake2b(data, digest_size=16).digest(), language)
        with self._cache_lock:
            cached = self._symbol_cache.get(key)
        if cached is None:
            cached = extract_symbols(text, language)
            with self._cache_lock:
                if len(self._symbol_cache) >= SYMBOL_CACHE_SIZE:
                    self._symbol_cache.pop(next(iter(self._symbol_cache)))
                self._symbol_cache[key] = cached
        return cached


def find_symbol(symbols: list[SymbolSpan], query: str) -> list[SymbolSpan]:
    """Definitions matching `query`, best first: the exact qualified name, then a qualified name
    ending in it ("Inner.method" finds "Outer.Inner.method"), then any definition with that name;
    definitions local to a function come after the others. Source order within each group."""
    wanted = query.strip().replace("::", ".").replace("#", ".").removesuffix("()")
    wanted = wanted.replace(".prototype.", ".")  # JavaScript: Foo.prototype.bar is Foo.bar
    if not wanted:
        return []

    def rank(span: SymbolSpan) -> tuple[int, int] | None:
        qualified = span.qualified_name
        if qualified == wanted:
            group = 0
        elif qualified.endswith("." + wanted):
            group = 1
        elif span.name == wanted:
            group = 2
        else:
            return None
        return (group + (3 if span.local else 0), span.start_line)

    ranked = [(rank(span), span) for span in symbols]
    return [span for key, span in sorted((r for r in ranked if r[0]), key=lambda r: r[0])]


def _format_symbols(symbols: list[SymbolSpan]) -> str:
    parts: list[str] = []
    used = 0
    for index, span in enumerate(symbols):
        entry = f"{span.qualified_name} ({span.kind}, lines {span.start_line}-{span.end_line})"
        if used + len(entry) > LIST_BUDGET_CHARS:
            parts.append(f"... and {len(symbols) - index} more")
            break
        parts.append(entry)
        used += len(entry) + 2
    return ", ".join(parts)


def _symbol_not_found(wp: WorkspacePath, query: str, symbols: list[SymbolSpan]) -> ToolResult:
    outline = [s for s in symbols if not s.local]
    if not outline:
        return ToolResult.failure(
            "symbol_not_found",
            f"no symbol {query!r} in {wp.shown}: it defines no functions or classes. Read it "
            f"without symbol.",
            available=[],
        )
    names = sorted({s.qualified_name for s in outline} | {s.name for s in outline})
    close = difflib.get_close_matches(query, names, n=3, cutoff=0.6)
    available: list[str] = []
    used = 0
    for span in outline:
        if used + len(span.qualified_name) > LIST_BUDGET_CHARS * 2:
            available.append(f"... and {len(outline) - len(available)} more")
            break
        available.append(span.qualified_name)
        used += len(span.qualified_name) + 2
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return ToolResult.failure(
        "symbol_not_found",
        f"no symbol {query!r} in {wp.shown}.{hint} Available symbols: {', '.join(available)}.",
        available=[s.qualified_name for s in outline],
    )


def _similar_paths(root: Any, raw: str) -> str:
    """ " Did you mean ...?" for a path that does not exist, from its parent directory's names."""
    try:
        wp = resolve_path(root, raw)
        parent = wp.path.parent
        names = os.listdir(parent)
    except (PathRefusedError, OSError):
        return ""
    close = difflib.get_close_matches(wp.path.name, names, n=3, cutoff=0.6)
    if not close:
        return ""
    base = parent.relative_to(wp.root)
    shown = [(base / name).as_posix() for name in close]
    return f" Did you mean {' or '.join(shown)}?"
