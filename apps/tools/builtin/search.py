"""`search`: regex search over the workspace's files, and a glob file finder.

Walks the workspace (or a subdirectory) like ripgrep does by default: files ignored by
`.gitignore` (at every level, plus `.git/info/exclude`) are skipped, and so are version-control
and cache directories, binary files and symbolic links (never followed, so a link cannot lead the
search outside the workspace). Results are capped, sorted by path, one `path:line:text` per match.

Nothing here can stall the server: patterns, globs and `.gitignore` rules run on RE2 (linear
time, see globs.py), files are read in chunks of bounded size (so a file of any size can be
searched), the whole search runs in a worker thread, and it stops after
SEARCH_TIME_LIMIT_SECONDS with the results found so far and a note saying so.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apps.engine.tools import Tool, ToolResult
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.globs import (
    MAX_PATTERN_CHARS,
    GitIgnore,
    PatternError,
    compile_glob,
    compile_regex,
    line_prefilter,
)
from apps.tools.builtin.paths import PathRefusedError, WorkspacePath, resolve_path
from apps.tools.builtin.text import looks_binary

__all__ = ["GitIgnore", "SearchTool", "compile_glob", "walk_files"]

DEFAULT_MAX_RESULTS = 100
MAX_RESULTS_LIMIT = 1_000
OUTPUT_BUDGET_CHARS = 9_000  # under the ToolSet's 10,000-character cap
MATCH_TEXT_CHARS = 200
MAX_FILES_SCANNED = 50_000
SEARCH_TIME_LIMIT_SECONDS = 10.0  # wall time of one search; then partial results and a note
READ_CHUNK_BYTES = 256 * 1024  # files are searched a chunk of whole lines at a time
MAX_PIECE_CHARS = 1_000_000  # a line longer than this is searched in pieces of this size
# Pruned wherever they appear below the search root, ignored or not: never what the agent means.
ALWAYS_SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".venv",
        "node_modules",
    }
)
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class SearchTool(Tool):
    name = "search"
    description = (
        "Find text or files in the workspace. pattern: a regular expression (RE2 syntax: like "
        "Python's, without backreferences or lookaround) searched line by line (use (?i) for "
        "case-insensitive); each match is shown as path:line:text. Files of any size are "
        "searched. glob: a file name pattern like '**/*.py' or 'src/*.ts' (without '/', it "
        "matches the file name at any depth); alone it lists matching files, with pattern it "
        "limits the search to them. path: a subdirectory (or file) to search in. Files ignored "
        "by .gitignore, binary files and dependency/cache directories are skipped. A search "
        f"stops after {SEARCH_TIME_LIMIT_SECONDS:g} s with the results found so far."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PATTERN_CHARS,
                "description": "Regular expression (RE2 syntax) to search for.",
            },
            "glob": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_PATTERN_CHARS,
                "description": "Only files matching this glob, e.g. '**/*.py'.",
            },
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "Directory or file to search, relative to the workspace root.",
            },
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RESULTS_LIMIT,
                "description": f"At most this many results (default {DEFAULT_MAX_RESULTS}).",
            },
        },
        "additionalProperties": False,
    }

    def __init__(self, ctx: ToolContext, *, time_limit: float = SEARCH_TIME_LIMIT_SECONDS):
        self.ctx = ctx
        self.time_limit = time_limit

    async def execute(
        self,
        pattern: str | None = None,
        glob: str | None = None,
        path: str | None = None,
        max_results: int | None = None,
    ) -> ToolResult:
        if pattern is None and glob is None:
            return ToolResult.failure(
                "invalid_arguments",
                "give pattern (a regex to search for), glob (files to list, e.g. '**/*.py'), "
                "or both.",
            )
        query = _Query(pattern, glob, max_results or DEFAULT_MAX_RESULTS, self.time_limit)
        return await asyncio.to_thread(_search, self.ctx.root, path or ".", query)


# --- the search ----------------------------------------------------------------------------------


@dataclass
class _Query:
    pattern: str | None
    glob: str | None
    limit: int
    time_limit: float
    regex: Any = None  # compiled RE2 patterns, set in the worker thread
    prefilter: Any = None
    file_filter: Any = None


def _search(root: Path, path: str, query: _Query) -> ToolResult:
    try:
        if query.pattern is not None:
            query.regex = compile_regex(query.pattern)
            query.prefilter = line_prefilter(query.pattern)
        if query.glob is not None:
            query.file_filter = compile_glob(query.glob)
    except PatternError as exc:
        return ToolResult.failure(exc.error_code, exc.message)
    try:
        wp = resolve_path(root, path)
    except PathRefusedError as exc:
        return exc.result()
    if not wp.exists():
        return ToolResult.failure(
            "file_not_found", f"{wp.shown} does not exist; search the workspace with path '.'."
        )
    return _run(wp, query)


@dataclass
class _Scan:
    deadline: float = float("inf")  # time.monotonic() value
    files: int = 0
    skipped_binary: int = 0
    truncated_walk: bool = False
    timed_out: bool = False
    results: list[str] = field(default_factory=list)
    more: bool = False

    def out_of_time(self) -> bool:
        if time.monotonic() > self.deadline:
            self.timed_out = True
        return self.timed_out


def _run(wp: WorkspacePath, query: _Query) -> ToolResult:
    scan = _Scan(deadline=time.monotonic() + query.time_limit)
    for relative, dir_fd, name in walk_files(wp, scan):
        if query.file_filter is not None:
            below = relative if wp.shown == "." else relative[len(wp.shown) + 1 :]
            if not query.file_filter.fullmatch(below or name):
                continue
        if query.regex is None:
            if len(scan.results) >= query.limit:
                scan.more = True
                break
            scan.results.append(relative)
            continue
        _search_file(dir_fd, name, relative, query, scan)
        if scan.more or scan.timed_out:
            break
    return _report(wp, query, scan)


def _search_file(dir_fd: int, name: str, relative: str, query: _Query, scan: _Scan) -> None:
    """Search one file a chunk of whole lines at a time, so memory and the time between two
    deadline checks stay bounded whatever the file's size."""
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError:
        return
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        number = 1  # the line the next block starts on
        pending = ""
        first = True
        while True:
            chunk = handle.read(READ_CHUNK_BYTES)
            if first:
                if looks_binary(chunk):
                    scan.skipped_binary += 1
                    return
                first = False
            text = pending + decoder.decode(chunk, final=not chunk)
            if not chunk:  # the end: what is left is the last line (no final newline)
                if text:
                    _search_block(text, number, relative, query, scan)
                return
            cut = text.rfind("\n")
            if cut >= 0:
                block, pending = text[:cut], text[cut + 1 :]
                _search_block(block, number, relative, query, scan)
                number += block.count("\n") + 1
            elif len(text) >= MAX_PIECE_CHARS:  # one huge line: search it in pieces
                pending = ""
                _search_block(text, number, relative, query, scan)
            else:
                pending = text
            if scan.more or scan.out_of_time():
                return


def _search_block(block: str, number: int, relative: str, query: _Query, scan: _Scan) -> None:
    """Lines of `block` (no final newline), the first being line `number`."""
    if query.prefilter is not None and query.prefilter.search(block) is None:
        return
    for offset, line in enumerate(block.split("\n")):
        if query.regex.search(line) is None:
            continue
        if len(scan.results) >= query.limit:
            scan.more = True
            return
        shown = line.rstrip("\r")
        if len(shown) > MATCH_TEXT_CHARS:
            shown = shown[:MATCH_TEXT_CHARS] + "…"
        scan.results.append(f"{relative}:{number + offset}:{shown}")


def _report(wp: WorkspacePath, query: _Query, scan: _Scan) -> ToolResult:
    what = f"/{query.pattern}/" if query.pattern is not None else f"files matching {query.glob!r}"
    where = "the workspace" if wp.shown == "." else wp.shown
    if query.pattern is not None and query.glob is not None:
        where += f" (files matching {query.glob!r})"
    lines: list[str] = []
    used = 0
    for entry in scan.results:
        if used + len(entry) + 1 > OUTPUT_BUDGET_CHARS:
            scan.more = True
            break
        lines.append(entry)
        used += len(entry) + 1
    notes = []
    if scan.more:
        notes.append(
            f"[Showing the first {len(lines)} results; there are more. Narrow the search with "
            f"path, glob or a more specific pattern.]"
        )
    if scan.timed_out:
        notes.append(
            f"[Search stopped after {query.time_limit:g} s ({scan.files} files looked at); the "
            f"results are partial. Narrow the path or the pattern.]"
        )
    if scan.truncated_walk:
        notes.append(f"[Stopped after {MAX_FILES_SCANNED} files; narrow the search with path.]")
    if scan.skipped_binary and query.pattern is not None:
        notes.append(f"[Skipped {scan.skipped_binary} binary files.]")
    if not lines:
        body = f"No matches for {what} in {where} ({scan.files} files looked at)."
    else:
        body = "\n".join(lines)
    return ToolResult.success(
        "\n".join([body, *notes]),
        results=len(lines),
        more=scan.more,
        files_scanned=scan.files,
        timed_out=scan.timed_out,
    )


def walk_files(wp: WorkspacePath, scan: _Scan | None = None) -> Iterator[tuple[str, int, str]]:
    """(path relative to the workspace root, parent dir fd, file name) of every file below `wp`
    that is not ignored, in sorted order. Walks with directory file descriptors and never
    follows symbolic links. The fd is only valid until the next item."""
    scan = scan or _Scan()
    ignore = GitIgnore()
    ignore.load_chain(wp.root, wp.parts)
    if not wp.is_dir():
        if not ignore.ignored(wp.shown, is_dir=False):
            fd = os.open(wp.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                scan.files += 1
                yield wp.shown, fd, wp.path.name
            finally:
                os.close(fd)
        return
    base = "" if wp.shown == "." else wp.shown
    for dirpath, dirnames, filenames, dir_fd in os.fwalk(wp.path, follow_symlinks=False):
        relative_dir = os.path.relpath(dirpath, wp.root)
        relative_dir = "" if relative_dir == "." else Path(relative_dir).as_posix()
        if relative_dir != base:  # the root's chain was loaded up front
            ignore.load(relative_dir, dir_fd)
        kept = []
        for name in sorted(dirnames):
            if scan.out_of_time():
                return
            child = f"{relative_dir}/{name}" if relative_dir else name
            if name in ALWAYS_SKIPPED_DIRS or ignore.ignored(child, is_dir=True):
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            if scan.out_of_time():
                return
            child = f"{relative_dir}/{name}" if relative_dir else name
            if ignore.ignored(child, is_dir=False):
                continue
            try:
                mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except OSError:
                continue
            if not stat.S_ISREG(mode):  # links, FIFOs, devices
                continue
            if scan.files >= MAX_FILES_SCANNED:
                scan.truncated_walk = True
                return
            scan.files += 1
            yield child, dir_fd, name
