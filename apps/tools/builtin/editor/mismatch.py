"""Why a `str_replace` anchor did not match exactly once, in words the model can act on: the lines
of every match, line numbers pasted from view output, a whitespace difference, or the closest
lines ("did you mean")."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from itertools import pairwise

from apps.engine.tools import ToolResult
from apps.tools.builtin.paths import WorkspacePath
from apps.tools.builtin.text import numbered_window, split_lines

# "    12\t" from view/read_file output, or "12: " / "12 | " from other tools, at a line start
_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+(?:\t| ?[:|│] )")


def find_all(text: str, needle: str, limit: int = 100_000) -> list[int]:
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


def overlapping(positions: list[int], length: int) -> bool:
    return any(b - a < length for a, b in pairwise(positions))


def line_of(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1


def mostly_numbered(text: str) -> bool:
    lines = [line for line in text.split("\n") if line.strip()]
    numbered = sum(1 for line in lines if _LINE_NUMBER_PREFIX.match(line))
    return bool(lines) and numbered * 2 >= len(lines)


def _strip_line_numbers(text: str) -> str:
    return "\n".join(_LINE_NUMBER_PREFIX.sub("", line, count=1) for line in text.split("\n"))


def mismatch(
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
    if mostly_numbered(old_str):
        stripped = _strip_line_numbers(old_str)
        again = find_all(text, stripped) if stripped.strip() else []
        hint = (
            "old_str starts its lines with line numbers (like '12\\t'), which view and "
            "read_file show but which are not part of the file. Remove them"
        )
        if len(again) == 1:
            line = line_of(text, again[0])
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
