"""Validation of text an agent produced before it is stored as a pitfall or prompt version:
bounded length, no control characters, and nothing that reads as tool-call markup or as an
attempt to override instructions (it would reach later prompts)."""

from __future__ import annotations

import re

PITFALL_TEXT_MAX = 500
PROMPT_TEXT_MAX = 2000

_UNSAFE = re.compile(
    r"<\s*/?\s*(tool_call|tool_use|function_calls?|invoke|parameter|antml|system|instructions?)\b"
    r"|<\|[a-z_]*\|>"
    r"|\"tool_calls\"\s*:"
    r"|\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(instructions?|prompts?|rules)\b"
    r"|\byou are now\b"
    r"|\bnew instructions\b"
    r"|^\s*(system|assistant|developer)\s*:",
    re.IGNORECASE | re.MULTILINE,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class UnsafeText(ValueError):
    """The text looks like markup or instructions meant for the model; it is not stored."""


def clean_text(text: str, *, limit: int = PITFALL_TEXT_MAX) -> str:
    """The text, trimmed and capped at `limit` characters; raises UnsafeText when it carries
    tool-call or instruction-override markup."""
    text = _CONTROL.sub(" ", text or "").strip()
    match = _UNSAFE.search(text)
    if match:
        raise UnsafeText(
            f"refused: {match.group(0).strip()!r} looks like tool-call or instruction markup; "
            "describe the mistake in plain words instead"
        )
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def first_line(text: str, limit: int = 200) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""
