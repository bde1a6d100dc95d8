"""The system prompt: a stable block, a prompt-cache breakpoint, the repository map (with a
breakpoint of its own), then a volatile block.

Stable block (byte-identical across tasks of one skill and mode, so a provider reuses its cache):
the engine's instructions for the mode, the skill's (or expert's) system prompt, and tool
guidance (the offered tool names, sorted). It carries the cache breakpoint (`TextBlock.cache`).

Repository map (tool modes only; apps/tools/builtin/repo_map.py, built by the runner at task
start): the same for every task in a workspace whose files have not changed, so it comes before
the volatile block and carries a breakpoint too: the next task in that workspace (a follow-up in
the conversation) reads it from the cache. Empty input adds no block.

Volatile block (changes per task, after the breakpoint so it never invalidates the stable bytes):
"Pitfalls seen before" (filled by evolution's retrieval; empty input adds no bytes), other named
context sections sorted by name, the workspace's own notes file `AGENTS.md` (capped), workspace
facts (sorted by key), and the date. The conversation itself is not here: it travels as messages,
and the Anthropic provider puts a second, moving breakpoint on its last block so the growing
history is cached too (at most 4 breakpoints: stable, map, moving; none ever on volatile bytes).

With `prompt_cache.enabled: false` the same text goes out without breakpoints (a plain prompt).
OpenAI-compatible providers send the blocks as one string, stable first, so the endpoint's
automatic prefix cache hits. Tool definitions go out sorted by name with their JSON Schema keys
sorted (`canonical_tools`), so reordering in code never changes the bytes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from apps.engine.llm.types import TextBlock, ToolSpec

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

PITFALLS_HEADING = "## Pitfalls seen before"
NOTES_FILE = "AGENTS.md"
NOTES_MAX_CHARS = 8_000


def build_system_prompt(
    *,
    mode: str,
    skill_prompt: str = "",
    tool_names: Iterable[str] = (),
    pitfalls: str = "",
    context: Mapping[str, str] | str = "",
    notes: str = "",
    facts: Mapping[str, str] | None = None,
    repo_map: str = "",
    today: dt.date | None = None,
    with_date: bool = True,
    cache: bool = True,
) -> tuple[TextBlock, ...]:
    """(stable, map, volatile) blocks; the map only when given (and not in direct_chat), the
    volatile one only when there is volatile material.

    `context`: other per-task material (a string, or named sections rendered in sorted order).
    `notes`: the workspace's AGENTS.md text (capped here). `facts`: workspace facts.
    `repo_map`: the workspace's repository map (repo_map.py), already within its budget."""
    stable = stable_block(mode=mode, skill_prompt=skill_prompt, tool_names=tool_names)
    volatile = volatile_block(
        pitfalls=pitfalls,
        context=context,
        notes=notes,
        facts=facts,
        today=(today or dt.datetime.now(dt.UTC).date()) if with_date else None,
    )
    blocks = [TextBlock(stable, cache=cache)]
    if repo_map.strip() and mode != "direct_chat":
        blocks.append(TextBlock(repo_map.strip(), cache=cache))
    if volatile:
        blocks.append(TextBlock(volatile))
    return tuple(blocks)


def stable_block(*, mode: str, skill_prompt: str = "", tool_names: Iterable[str] = ()) -> str:
    parts = [INSTRUCTIONS[mode]]
    if skill_prompt.strip():
        parts.append(skill_prompt.strip())
    names = sorted(set(tool_names))
    if names and mode != "direct_chat":
        parts.append(
            "Tools available in this task: "
            + ", ".join(names)
            + ". Call only these; read before you edit, and check your work before you answer."
        )
    return "\n\n".join(parts)


def volatile_block(
    *,
    pitfalls: str = "",
    context: Mapping[str, str] | str = "",
    notes: str = "",
    facts: Mapping[str, str] | None = None,
    today: dt.date | None = None,
) -> str:
    sections: list[str] = []
    if pitfalls.strip():
        sections.append(f"{PITFALLS_HEADING}\n{pitfalls.strip()}")
    if isinstance(context, Mapping):
        sections += [
            f"## {name}\n{text.strip()}" for name, text in sorted(context.items()) if text.strip()
        ]
    elif context.strip():
        sections.append(context.strip())
    if notes.strip():
        sections.append(f"## Workspace notes ({NOTES_FILE})\n{cap_notes(notes)}")
    if facts:
        lines = [f"- {key}: {value}" for key, value in sorted(facts.items()) if str(value).strip()]
        if lines:
            sections.append("## Workspace\n" + "\n".join(lines))
    if today is not None:
        sections.append(f"Today is {today.isoformat()}.")
    return "\n\n".join(sections)


def cap_notes(text: str, limit: int = NOTES_MAX_CHARS) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n[... {NOTES_FILE} cut at {limit} characters]"


def read_notes(root: Path, limit: int = NOTES_MAX_CHARS) -> str:
    """The workspace's AGENTS.md (capped), or "" when there is none or it cannot be read."""
    path = root / NOTES_FILE
    try:
        if not path.is_file() or path.is_symlink():
            return ""
        with path.open("rb") as handle:
            raw = handle.read(limit * 4 + 1)
    except OSError:
        return ""
    return cap_notes(raw.decode("utf-8", "replace"), limit)


def canonical_json(value: Any) -> Any:
    """`value` with every mapping's keys sorted (recursively): one byte form for one meaning."""
    return json.loads(json.dumps(value, sort_keys=True, ensure_ascii=False))


def canonical_tools(specs: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    """Tool definitions sorted by name, schemas with sorted keys."""
    return tuple(
        ToolSpec(spec.name, spec.description, _canonical_schema(spec.input_schema))
        for spec in sorted(specs, key=lambda spec: spec.name)
    )


# A tool's input_schema is its class's own dict, checked once when the class is made and not
# changed after (tools.py): its canonical form is made once, not at every run's start. Keyed by
# identity (the schema is held, so its id is not reused), at most _SCHEMAS_KEPT of them.
_canonical_schemas: dict[int, tuple[dict[str, Any], Any]] = {}
_SCHEMAS_KEPT = 512


def _canonical_schema(schema: dict[str, Any]) -> Any:
    kept = _canonical_schemas.get(id(schema))
    if kept is not None and kept[0] is schema:
        return kept[1]
    canonical = canonical_json(schema)
    if len(_canonical_schemas) < _SCHEMAS_KEPT:
        _canonical_schemas[id(schema)] = (schema, canonical)
    return canonical


def system_text(blocks: Iterable[TextBlock]) -> str:
    """The blocks as one string, as OpenAI-compatible providers send them (stable first)."""
    return "\n\n".join(block.text for block in blocks if block.text)
