"""The unified diff of an edit, for people (the chat's diff view)."""

from __future__ import annotations

import difflib

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
