"""Condensing a check's output for the model (run.py): per failed command the first failure
(test name, failing line, assertion), the traceback tail, or the first lint findings."""

from __future__ import annotations

import re

MAX_ERROR_CHARS = 4_000

_SECTION = re.compile(r"^=+ (FAILURES|ERRORS) =+$")
_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")
_BANNER = re.compile(r"^=+ .* =+$")
_RUFF_FINDING = re.compile(r"^\S.*:\d+:\d+: [A-Z]+\d*\b")


def clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[: limit // 2] + "\n[...]\n" + text[-limit // 2 :]


def tail(lines: list[str], count: int = 30) -> list[str]:
    lines = [line for line in lines if line.strip()]
    return lines[-count:]


def condense_pytest(output: str) -> list[str]:
    """First failure (name, failing line, assertion) + traceback tail + pytest's summary."""
    lines = output.splitlines()
    summary = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    totals = next(
        (
            line.strip("= ")
            for line in reversed(lines)
            if re.search(r"\d+ (failed|passed|error|errors)\b", line)
        ),
        "",
    )
    block: list[str] = []
    name = ""
    in_section = False
    for line in lines:
        if _SECTION.match(line):
            in_section = True
            continue
        if not in_section:
            continue
        header = _HEADER.match(line)
        if header and name:
            break
        if header:
            name = header.group(1)
            continue
        if _BANNER.match(line):
            if name:
                break
            continue
        if name:
            block.append(line)
    block = [line.rstrip() for line in block]
    while block and not block[-1]:
        block.pop()
    while block and not block[0]:
        block.pop(0)
    if not block:
        return ["\n".join([*summary[:5], *tail(lines)])]
    if len(block) > 40:  # a deep traceback: the test's start and the tail that matters
        block = [*block[:6], "    [... traceback frames omitted ...]", *block[-30:]]
    head = [f"first failure: {name}"] + ([totals] if totals else [])
    return ["\n".join([*head, *summary[:5], "", *block])]


def condense_ruff(output: str, limit: int = 20) -> list[str]:
    lines = output.splitlines()
    findings = [line for line in lines if _RUFF_FINDING.match(line)]
    if not findings:
        return ["\n".join(tail(lines))]
    found = next((line for line in reversed(lines) if line.startswith("Found ")), "")
    shown = findings[:limit]
    if len(findings) > limit:
        shown.append(f"[... {len(findings) - limit} more findings ...]")
    return ["\n".join([*shown, found] if found else shown)]


def condense(tool: str, output: str) -> list[str]:
    if tool == "pytest":
        return condense_pytest(output)
    if tool in ("ruff", "ruff_check"):
        return condense_ruff(output)
    return ["\n".join(tail(output.splitlines()))]
