"""The repository map: a compact, deterministic outline of a workspace (each file's path and the
top-level definitions found in it) that the runner puts into the system prompt at task start, so
the model knows where things are without spending steps on `search` and can go straight to
`read_file(path, symbol=...)`.

    build_repo_map(root, max_tokens=..., time_limit_seconds=...) -> str     ("" for nothing)

The files are those `search` walks (walk_files): `.gitignore` rules at every level, version
control, cache and dependency directories, symbolic links and special files are left out; so are
binary files. Definitions come from the symbol extractor `read_file(symbol=)` uses (Python
through `ast`, other languages through tree-sitter when their grammar is installed), top-level
only; files larger than MAX_PARSE_BYTES are listed without them and never read whole.

One line per file, grouped under a line per directory, sorted, so the same tree gives the same
bytes (the map sits in the cached prefix of the prompt). It stays within `max_tokens` (4
characters a token): when the full map is larger, every path is listed and definitions are
shown for the first files (in path order) that fit; when even the paths do not fit, directories
are listed with their number of files (as many as fit). A note says which. Files past what the
budget could show are not parsed. The walk and the parsing stop after `time_limit_seconds` (or
at the MAX_FILES_SCANNED files a search walks) with a note that the map is partial. Blocking:
call it in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from apps.tools.builtin.paths import PathRefusedError, resolve_path
from apps.tools.builtin.search import MAX_FILES_SCANNED, _Scan, walk_files
from apps.tools.builtin.symbols import extract_symbols, language_for_path
from apps.tools.builtin.text import BINARY_SNIFF_BYTES, decode_text, looks_binary

CHARS_PER_TOKEN = 4  # the rule of thumb the prompt-size estimates use
MAX_PARSE_BYTES = 256 * 1024  # larger files are listed by path only (never read whole)
HEADING = "## Repository map"
INTRO = (
    "The workspace's files when this task started (sorted; files ignored by .gitignore, binary "
    "files and dependency directories left out), each with its top-level definitions:"
)
CUT_NOTE = "[Map cut to its token budget: {}; search finds the rest.]"
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


# Each file's findings (binary or not, its top-level definitions), kept per process by the
# file's identity and version: every task starts with the map of its workspace, and files
# unchanged since the last map are neither read nor parsed again (that was about half of
# preparing a task's run in the demo workspace, 50 tasks starting at once: bench/chat_load.py;
# the walk remains). A file counts
# as unchanged while its device, inode, size, mtime and ctime are the same (ctime cannot be set
# back by a program, so `touch -d` or an editor restoring mtime still reads as a change). A file
# changed less than RACY_SECONDS before it was read is not kept: a change within the same clock
# tick could otherwise leave every stamp as it was (git's "racy" index entries).
RACY_SECONDS = 2.0
MEMO_MAX_FILES = 50_000  # past this many, the memo starts over
# (device, inode) -> ((size, mtime, ctime), binary, {language: top-level definitions})
_memo: dict[tuple[int, int], tuple[tuple[int, int, int], bool, dict[str, tuple[str, ...]]]] = {}
_memo_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class _Entry:
    path: str  # relative, posix
    names: tuple[str, ...]  # top-level definitions, in source order
    parsed: bool = True  # False: past the budget, its definitions were not looked for


def build_repo_map(root: Path | str, *, max_tokens: int, time_limit_seconds: float) -> str:
    """The map of the workspace at `root` as prompt text, or "" when it has no files to show."""
    budget = max_tokens * CHARS_PER_TOKEN
    entries, scan = _collect(root, time.monotonic() + time_limit_seconds, budget)
    if not entries:
        return ""
    notes = []
    if scan.timed_out:
        notes.append(f"[Map stopped after {time_limit_seconds:g} s: more files exist.]")
    elif scan.truncated_walk:
        notes.append(f"[Map stopped at {MAX_FILES_SCANNED:,} files: more files exist.]")
    return render(entries, budget, notes)


def _collect(root: Path | str, deadline: float, budget: int) -> tuple[list[_Entry], _Scan]:
    """Every file's entry in path order (walk_files walks in the order render sorts). Files are
    parsed only while the lines so far (counted short: names without directories) fit in
    `budget`; a file after that could not get its definitions shown anyway."""
    try:
        start = resolve_path(root, ".")
    except PathRefusedError:
        return [], _Scan()
    scan = _Scan(deadline=deadline)
    entries: list[_Entry] = []
    parsed_chars = 0
    for relative, dir_fd, name in walk_files(start, scan):
        if scan.out_of_time():
            break
        if name == ".git":  # a worktree's or submodule's pointer file
            continue
        entry = _entry(relative, dir_fd, name, parse=parsed_chars <= budget)
        if entry is not None:
            entries.append(entry)
            parsed_chars += len(name) + len(_suffix(entry.names)) + 1
    return entries, scan


def _entry(relative: str, dir_fd: int, name: str, *, parse: bool) -> _Entry | None:
    """The file's entry (definitions only when `parse`); None for a binary or unreadable file.
    A file unchanged since it was last looked at is neither read nor parsed again (_memo)."""
    language = language_for_path(name) if parse else None
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            key, version = (info.st_dev, info.st_ino), _version(info)
            known = _memo.get(key)
            if known is not None and known[0] == version:
                if known[1]:
                    return None  # binary
                if language is None or info.st_size > MAX_PARSE_BYTES:
                    return _Entry(relative, (), parsed=parse)
                if language in known[2]:
                    return _Entry(relative, known[2][language])
            read_at = time.time_ns()
            data = handle.read(MAX_PARSE_BYTES + 1 if language else BINARY_SNIFF_BYTES)
    except OSError:
        return None
    binary = looks_binary(data)
    entry = None if binary else _text_entry(relative, data, language, parse)
    if max(info.st_mtime_ns, info.st_ctime_ns) < read_at - RACY_SECONDS * 1e9:
        names = dict(known[2]) if known is not None and known[0] == version else {}
        if entry is not None and language is not None and len(data) <= MAX_PARSE_BYTES:
            names[language] = entry.names
        with _memo_lock:
            if len(_memo) >= MEMO_MAX_FILES:
                _memo.clear()
            _memo[key] = (version, binary, names)
    return entry


def _version(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _text_entry(relative: str, data: bytes, language: str | None, parse: bool) -> _Entry | None:
    """The entry of a text file whose first bytes are `data`; None when it cannot be decoded."""
    if language is None or len(data) > MAX_PARSE_BYTES:
        return _Entry(relative, (), parsed=parse)
    decoded = decode_text(data)
    if decoded is None:
        return None
    names: tuple[str, ...] = ()
    with contextlib.suppress(Exception):  # a file the extractor cannot take is listed bare
        names = tuple(
            dict.fromkeys(
                span.name
                for span in extract_symbols(decoded.text, language)
                if span.parent is None and not span.local and not span.name.startswith("_")
            )
        )
    return _Entry(relative, names)


def render(entries: list[_Entry], budget_chars: int, notes: list[str] | None = None) -> str:
    """The map text within `budget_chars`, the most detailed of: every file with its
    definitions; every file, with definitions for the first files (in path order) that fit;
    every directory with its number of files; the first directories and a note."""
    entries = sorted(entries, key=lambda entry: _sort_key(entry.path))
    notes = list(notes or ())
    fixed = len(HEADING) + len(INTRO) + sum(len(note) + 1 for note in notes) + 2
    full = _lines(entries, len(entries))
    if fixed + _size(full) <= budget_chars and all(entry.parsed for entry in entries):
        return _text(full, notes)
    total = len(entries)
    bare = _lines(entries, 0)
    note = CUT_NOTE.format(f"definitions shown for the first {total} of {total} files")
    room = budget_chars - fixed - len(note) - 1  # the longest this note can be
    if _size(bare) <= room:
        named, used = 0, _size(bare)
        while (
            named < total
            and entries[named].parsed
            and used + len(_suffix(entries[named].names)) <= room
        ):
            used += len(_suffix(entries[named].names))
            named += 1
        notes.append(CUT_NOTE.format(f"definitions shown for the first {named} of {total} files"))
        return _text(_lines(entries, named), notes)
    counts: dict[str, int] = {}
    for entry in entries:
        directory = entry.path.rpartition("/")[0]
        label = f"{directory}/" if directory else "./"
        counts[label] = counts.get(label, 0) + 1
    what = "directories with their number of files"
    room = budget_chars - fixed - len(CUT_NOTE.format(f"{what}, {len(counts)} more not listed")) - 1
    if room <= 0:  # not even the heading fits: no map
        return ""
    lines, used = [], 0
    for directory, count in counts.items():  # in path order already
        line = f"{directory} ({count} file{'s' if count != 1 else ''})"
        if used + len(line) + 1 > room:
            break
        lines.append(line)
        used += len(line) + 1
    left = len(counts) - len(lines)
    notes.append(CUT_NOTE.format(f"{what}, {left} more not listed" if left else what))
    return _text(lines, notes)


def _sort_key(path: str) -> tuple[tuple[str, ...], str]:
    directory, _, name = path.rpartition("/")
    return (tuple(directory.split("/")) if directory else (), name)


def _suffix(names: tuple[str, ...]) -> str:
    return ": " + ", ".join(names) if names else ""


def _lines(entries: list[_Entry], named: int) -> list[str]:
    """One line per file (the first `named` files with their definitions), under a line per
    directory."""
    lines: list[str] = []
    current = ""
    for index, entry in enumerate(entries):
        directory, _, name = entry.path.rpartition("/")
        if directory != current:
            lines.append(f"{directory}/")
            current = directory
        indent = "  " if directory else ""
        lines.append(f"{indent}{name}{_suffix(entry.names) if index < named else ''}")
    return lines


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _text(lines: list[str], notes: list[str]) -> str:
    return "\n".join([HEADING, INTRO, *lines, *notes])
