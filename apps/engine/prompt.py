"""The system prompt: a stable block, a prompt-cache breakpoint, then a volatile block.

The stable block (engine instructions for the mode + the skill's system prompt) is byte-identical
across tasks of the same skill, so providers can reuse its cache; everything that changes per task
(pitfalls, retrieved memory, the date) goes after the breakpoint. Sections of the volatile block
are sorted by name. The prompt is built once per run, so every step of a run sends the same bytes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from apps.engine.llm.types import TextBlock

INSTRUCTIONS = {
    "react": (
        "You are agentkit, an agent that completes the user's task by calling tools.\n"
        "Work in small steps: call a tool, read its result, decide the next step. A tool result "
        "that starts with ERROR [code] explains what was wrong with the call; fix the call and "
        "try again instead of repeating it.\n"
        "When the task is done, reply with your final answer and do not call any tool: a reply "
        "without a tool call ends the task."
    ),
    "direct_chat": "You are agentkit, a helpful assistant. Answer the user directly and concisely.",
}


def build_system_prompt(
    *,
    mode: str,
    skill_prompt: str = "",
    context: Mapping[str, str] | str = "",
    today: dt.date | None = None,
    cache: bool = True,
) -> tuple[TextBlock, ...]:
    """`context`: per-task material (a string, or named sections rendered in sorted order)."""
    stable = INSTRUCTIONS[mode]
    if skill_prompt.strip():
        stable += "\n\n" + skill_prompt.strip()
    if isinstance(context, Mapping):
        sections = [
            f"## {name}\n{text.strip()}" for name, text in sorted(context.items()) if text.strip()
        ]
        volatile = "\n\n".join(sections)
    else:
        volatile = context.strip()
    today = today or dt.datetime.now(dt.UTC).date()
    volatile = f"{volatile}\n\nToday is {today.isoformat()}." if volatile else f"Today is {today}."
    return (TextBlock(stable, cache=cache), TextBlock(volatile))
