"""Builtin tools by name. Imports are lazy so a missing optional dependency of one tool does not
break the others; the names match apps.engine.config.KNOWN_TOOLS."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from apps.engine.tools import Tool
from apps.tools.builtin.context import ToolContext

TOOL_CLASSES: dict[str, str] = {
    "advance_phase": "apps.tools.builtin.advance_phase:AdvancePhaseTool",
    "read_file": "apps.tools.builtin.read_file:ReadFileTool",
    "run_tests": "apps.tools.builtin.run_tests:RunTestsTool",
    "search": "apps.tools.builtin.search:SearchTool",
    "shell": "apps.tools.builtin.shell:ShellTool",
    "str_replace_editor": "apps.tools.builtin.editor:StrReplaceEditorTool",
    "think": "apps.tools.builtin.think:ThinkTool",
}


def tool_class(name: str) -> type[Tool]:
    try:
        target = TOOL_CLASSES[name]
    except KeyError:
        raise KeyError(f"unknown tool {name!r}; known: {', '.join(sorted(TOOL_CLASSES))}") from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def available_tool_names() -> list[str]:
    """Names whose implementation module exists (later issues add the rest)."""
    names = []
    for name in sorted(TOOL_CLASSES):
        try:
            tool_class(name)
        except (ImportError, AttributeError):
            continue
        names.append(name)
    return names


def build_tools(ctx: ToolContext, names: Iterable[str] | None = None) -> list[Tool]:
    wanted = sorted(set(names)) if names is not None else available_tool_names()
    return [tool_class(name)(ctx) for name in wanted]
