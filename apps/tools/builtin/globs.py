"""Globs, `.gitignore` rules and search patterns, all matched by RE2.

RE2 runs in time linear in the text for any pattern (no backtracking), so neither a pattern
the model writes nor a hostile `.gitignore` in the repository can stall the process: Python's
`re` would take exponential time on `(a+)+$` or a deep `**/**/**/...` glob, holding the GIL the
whole time. The price is RE2's syntax: no backreferences, lookaround or atomic groups; such a
pattern gets a clear error instead.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import re2

MAX_PATTERN_CHARS = 2_000  # a search pattern or glob from the model
MAX_RULE_CHARS = 4_096  # a .gitignore line (git's own PATH_MAX); longer ones are dropped
MAX_GITIGNORE_BYTES = 1_000_000
MAX_RULES_PER_FILE = 10_000  # real .gitignore files have hundreds; the rest are not read
RE2_MAX_MEM = 8 << 20  # bytes for one compiled program (RE2's default); larger ones are refused
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class PatternError(ValueError):
    """A pattern that cannot run: `error_code` and a message saying what to do instead."""

    def __init__(self, error_code: str, message: str):
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _options() -> Any:
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False  # errors are reported to the model, not printed on stderr
    return options


def compile_regex(pattern: str) -> Any:
    """A search pattern compiled by RE2. Raises PatternError: `invalid_regex` for a pattern that
    is not a regular expression at all, `unsupported_regex` for one that uses Python features
    RE2 does not have (backreferences, lookaround, atomic groups, possessive quantifiers)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(
            "invalid_regex",
            f"pattern is {len(pattern)} characters long; patterns are limited to "
            f"{MAX_PATTERN_CHARS}. Search for a shorter, distinctive part of the text.",
        )
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        reason = error_text(exc)
    try:
        re.compile(pattern)  # parsing only; the pattern is never run by Python's engine
    except re.error as exc:
        raise PatternError(
            "invalid_regex",
            f"pattern is not a valid regular expression: {exc}. Escape special characters "
            f"such as ( [ . * + ? with a backslash to match them literally.",
        ) from None
    except (RecursionError, OverflowError, MemoryError):
        pass
    raise PatternError(
        "unsupported_regex",
        f"pattern cannot run on the search engine (RE2, guaranteed linear time): {reason}. "
        f"Backreferences (\\1), lookahead/lookbehind ((?=...), (?!...), (?<=...), (?<!...)), "
        f"atomic groups and possessive quantifiers are not available, and repetition counts "
        f"are limited to 1000. Rewrite the pattern without them, e.g. search for the fixed part "
        f"and read the surrounding lines.",
    )


def error_text(exc: Exception) -> str:
    """RE2 reports its errors as bytes."""
    reason = exc.args[0] if exc.args else ""
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", errors="replace")
    return str(reason) or "not accepted"


def line_prefilter(pattern: str) -> Any | None:
    """A whole-text version of a line pattern (`^`/`$` at every line), to skip files without a
    match in one pass. None when it would not be a safe superset of the line matches."""
    if "\\A" in pattern or "\\z" in pattern:
        return None
    try:
        return re2.compile(f"(?m:{pattern})", _options())
    except re2.error:
        return None


def translate(pattern: str) -> str:
    """A glob / gitignore pattern as an RE2 regex over '/'-separated paths: `*` and `?` stay
    inside one segment, `**` crosses segments (`**/` = zero or more directories), `[...]` is a
    class. Consecutive `**/` collapse into one: they mean the same thing."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            if pattern.startswith("**", i):
                if pattern.startswith("**/", i):
                    if not out or out[-1] != "(?:.*/)?":
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


def compile_glob(glob: str) -> Any:
    """A file finder glob, matched (fullmatch) against the path below the search directory.
    Without '/', it matches the file name at any depth ('*.py' finds every Python file, like
    find -name). Raises PatternError (`invalid_glob`)."""
    if len(glob) > MAX_PATTERN_CHARS:
        raise PatternError(
            "invalid_glob",
            f"glob is {len(glob)} characters long; globs are limited to {MAX_PATTERN_CHARS}.",
        )
    glob = glob.strip().removeprefix("./").lstrip("/")
    regex = translate(glob) if "/" in glob else f"(?:.*/)?{translate(glob)}"
    try:
        return re2.compile(regex, _options())
    except re2.error as exc:
        raise PatternError(
            "invalid_glob",
            f"glob {glob!r} cannot be used ({error_text(exc)}); use * ? ** and [abc] classes, e.g. "
            f"'**/*.py' or 'src/*.ts'.",
        ) from None


@dataclass(frozen=True)
class _Rule:
    base: str  # directory of the .gitignore, relative to the workspace root ("" for the root)
    regex: Any  # a compiled RE2 pattern, fullmatched
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
            self._add(handle.read(MAX_GITIGNORE_BYTES).decode("utf-8", errors="replace"), base)

    def _load_file(self, path: Path, base: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            if path.is_symlink() or not path.is_file():
                return
            with path.open("rb") as handle:
                self._add(handle.read(MAX_GITIGNORE_BYTES).decode("utf-8", errors="replace"), base)

    def _add(self, text: str, base: str) -> None:
        for raw in text.splitlines()[:MAX_RULES_PER_FILE]:
            line = raw.rstrip("\r")
            if not line or line.startswith("#") or len(line) > MAX_RULE_CHARS:
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
            anchored = "/" in line  # relative to the .gitignore's directory; else any depth
            regex = translate(line.lstrip("/")) if anchored else "(?:.*/)?" + translate(line)
            with contextlib.suppress(re2.error):
                compiled = re2.compile(regex, _options())
                self.rules.append(_Rule(base, compiled, negated, directory_only))

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
            if rule.regex.fullmatch(below):
                verdict = not rule.negated
        return verdict
