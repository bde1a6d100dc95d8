"""`search`: regex search over the workspace's files, and a glob file finder.

Walks the workspace (or a subdirectory) like ripgrep does by default: files ignored by
`.gitignore` (at every level, plus `.git/info/exclude`) are skipped, and so are version-control
and cache directories, binary files, files over 10 MB and symbolic links (never followed, so a
link cannot lead the search outside the workspace). Results are capped, sorted by path, one
`path:line:text` per match.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from apps.engine.tools import Tool, ToolResult
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.paths import (
    MAX_FILE_BYTES,
    PathRefusedError,
    WorkspacePath,
    looks_binary,
    resolve_path,
)

DEFAULT_MAX_RESULTS = 100
MAX_RESULTS_LIMIT = 1_000
OUTPUT_BUDGET_CHARS = 9_000  # under the ToolSet's 10,000-character cap
MATCH_TEXT_CHARS = 200
MAX_FILES_SCANNED = 50_000
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
        "Find text or files in the workspace. pattern: a Python regular expression searched "
        "line by line (use (?i) for case-insensitive); each match is shown as path:line:text. "
        "glob: a file name pattern like '**/*.py' or 'src/*.ts' (without '/', it matches the "
        "file name at any depth); alone it lists matching files, with pattern it limits the "
        "search to them. path: a subdirectory (or file) to search in. Files ignored by "
        ".gitignore, binary files and dependency/cache directories are skipped."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Regular expression (Python syntax) to search for.",
            },
            "glob": {
                "type": "string",
                "minLength": 1,
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

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx

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
        regex = None
        if pattern is not None:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                return ToolResult.failure(
                    "invalid_regex",
                    f"pattern is not a valid regular expression: {exc}. Escape special "
                    f"characters such as ( [ . * + ? with a backslash to match them literally.",
                )
        file_filter = compile_glob(glob) if glob is not None else None
        limit = max_results or DEFAULT_MAX_RESULTS
        return await asyncio.to_thread(
            _search, self.ctx.root, path or ".", regex, file_filter, glob, limit
        )


# --- the search ----------------------------------------------------------------------------------


def _search(
    root: Path,
    path: str,
    regex: re.Pattern[str] | None,
    file_filter: re.Pattern[str] | None,
    glob: str | None,
    limit: int,
) -> ToolResult:
    try:
        wp = resolve_path(root, path)
    except PathRefusedError as exc:
        return exc.result()
    if not wp.exists():
        return ToolResult.failure(
            "file_not_found", f"{wp.shown} does not exist; search the workspace with path '.'."
        )
    return _run(wp, regex, file_filter, glob, limit)


@dataclass
class _Scan:
    files: int = 0
    skipped_binary: int = 0
    skipped_large: int = 0
    truncated_walk: bool = False
    results: list[str] = field(default_factory=list)
    more: bool = False


def _run(
    wp: WorkspacePath,
    regex: re.Pattern[str] | None,
    file_filter: re.Pattern[str] | None,
    glob: str | None,
    limit: int,
) -> ToolResult:
    scan = _Scan()
    for relative, dir_fd, name in walk_files(wp, scan):
        if file_filter is not None:
            below = relative if wp.shown == "." else relative[len(wp.shown) + 1 :]
            if not file_filter.match(below or name):
                continue
        if regex is None:
            if len(scan.results) >= limit:
                scan.more = True
                break
            scan.results.append(relative)
            continue
        text = _read_text(dir_fd, name, scan)
        if text is None or regex.search(text) is None:
            continue
        for number, line in enumerate(text.split("\n"), start=1):
            if regex.search(line):
                if len(scan.results) >= limit:
                    scan.more = True
                    break
                shown = line.rstrip("\r")
                if len(shown) > MATCH_TEXT_CHARS:
                    shown = shown[:MATCH_TEXT_CHARS] + "…"
                scan.results.append(f"{relative}:{number}:{shown}")
        if scan.more:
            break
    return _report(wp, regex, glob, limit, scan)


def _report(
    wp: WorkspacePath, regex: re.Pattern[str] | None, glob: str | None, limit: int, scan: _Scan
) -> ToolResult:
    what = f"/{regex.pattern}/" if regex is not None else f"files matching {glob!r}"
    where = "the workspace" if wp.shown == "." else wp.shown
    if regex is not None and glob is not None:
        where += f" (files matching {glob!r})"
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
    if scan.truncated_walk:
        notes.append(f"[Stopped after {MAX_FILES_SCANNED} files; narrow the search with path.]")
    skipped = []
    if scan.skipped_binary:
        skipped.append(f"{scan.skipped_binary} binary")
    if scan.skipped_large:
        skipped.append(f"{scan.skipped_large} over 10 MB")
    if skipped and regex is not None:
        notes.append(f"[Skipped {' and '.join(skipped)} files.]")
    if not lines:
        body = f"No matches for {what} in {where} ({scan.files} files looked at)."
    else:
        body = "\n".join(lines)
    return ToolResult.success(
        "\n".join([body, *notes]),
        results=len(lines),
        more=scan.more,
        files_scanned=scan.files,
    )


def _read_text(dir_fd: int, name: str, scan: _Scan) -> str | None:
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > MAX_FILE_BYTES:
            scan.skipped_large += 1
            return None
        data = handle.read(MAX_FILE_BYTES + 1)
    if looks_binary(data):
        scan.skipped_binary += 1
        return None
    return data.decode("utf-8", errors="replace")


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
            child = f"{relative_dir}/{name}" if relative_dir else name
            if name in ALWAYS_SKIPPED_DIRS or ignore.ignored(child, is_dir=True):
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                    kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
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


# --- globs and .gitignore ------------------------------------------------------------------------


def _translate(pattern: str) -> str:
    """A glob / gitignore pattern as a regex over '/'-separated paths: `*` and `?` stay inside
    one segment, `**` crosses segments (`**/` = zero or more directories), `[...]` is a class."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if pattern.startswith("**", i):
                if pattern.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                else:
                    out.append(".*")
                    i += 2
                continue
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 2 if pattern.startswith("[!", i) else i + 1)
            if end < 0:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
                continue
        elif char == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def compile_glob(glob: str) -> re.Pattern[str]:
    """A file finder glob, matched against the path below the search directory. Without '/',
    it matches the file name at any depth ('*.py' finds every Python file, like find -name)."""
    glob = glob.strip().removeprefix("./").lstrip("/")
    if "/" not in glob:
        return re.compile(f"(?:.*/)?{_translate(glob)}$")
    return re.compile(_translate(glob) + "$")


@dataclass(frozen=True)
class _Rule:
    base: str  # directory of the .gitignore, relative to the workspace root ("" for the root)
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool


class GitIgnore:
    """The rules of every .gitignore from the workspace root down to the current directory, plus
    .git/info/exclude, evaluated as git does: the last matching rule wins, `!` re-includes,
    a trailing `/` matches directories only, a pattern with a `/` is relative to its file's
    directory, one without matches at any depth. (Re-including a file inside an ignored
    directory is impossible in git too: the walk never enters ignored directories.)"""

    def __init__(self) -> None:
        self.rules: list[_Rule] = []

    def load_chain(self, root: Path, parts: tuple[str, ...]) -> None:
        """Rules of the root and of each directory from the root to parts (exclusive of a file)."""
        self._load_file(root / ".git" / "info" / "exclude", "")
        self._load_file(root / ".gitignore", "")
        for depth in range(1, len(parts) + 1):
            base = "/".join(parts[:depth])
            self._load_file(root / base / ".gitignore", base)

    def load(self, base: str, dir_fd: int) -> None:
        try:
            fd = os.open(".gitignore", _OPEN_FLAGS, dir_fd=dir_fd)
        except OSError:
            return
        with os.fdopen(fd, "rb") as handle:
            self._add(handle.read(1_000_000).decode("utf-8", errors="replace"), base)

    def _load_file(self, path: Path, base: str) -> None:
        with contextlib.suppress(OSError):
            if path.is_symlink() or not path.is_file():
                return
            self._add(path.read_text(encoding="utf-8", errors="replace"), base)

    def _add(self, text: str, base: str) -> None:
        for raw in text.splitlines():
            line = raw.rstrip("\r")
            if not line or line.startswith("#"):
                continue
            # trailing spaces are ignored unless escaped with a backslash
            stripped = line.rstrip(" ")
            if stripped.endswith("\\") and len(stripped) < len(line):
                stripped += " "
            line = stripped
            negated = line.startswith("!")
            if negated or line.startswith(("\\!", "\\#")):
                line = line[1:]
            directory_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            if "/" in line:
                regex = "^" + _translate(line.lstrip("/")) + "$"
            else:
                regex = "^(?:.*/)?" + _translate(line) + "$"
            with contextlib.suppress(re.error):
                self.rules.append(_Rule(base, re.compile(regex), negated, directory_only))

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        verdict = False
        for rule in self.rules:
            if rule.directory_only and not is_dir:
                continue
            if rule.base:
                if not relative.startswith(rule.base + "/"):
                    continue
                below = relative[len(rule.base) + 1 :]
            else:
                below = relative
            if rule.regex.match(below):
                verdict = not rule.negated
        return verdict
