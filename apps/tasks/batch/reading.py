"""Reading a batch file with the line of every value: YAML through its node tree (marks),
JSONL line by line. Problems found while reading go to `errors` as (line, message); spec.py
checks the tasks."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass
class RawTask:
    """One task as read: its data, the line it starts on, and a way to find a field's line."""

    data: Any
    line: int
    lines: Any  # callable(loc) -> line


def node_line(node: yaml.Node | None, loc: tuple, default: int) -> int:
    """The line of the deepest node along `loc` (mapping keys / sequence indexes)."""
    line = default
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            if found is None:
                return line
            key = next(k for k, v in node.value if v is found)
            line, node = key.start_mark.line + 1, found
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                return line
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def read_yaml(path: Path, text: str, errors: list) -> tuple[list[RawTask], dict, Any]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        errors.append((mark.line + 1 if mark else 0, f"not valid YAML: {problem}"))
        return [], {}, None
    defaults_node = None
    defaults: Any = {}
    tasks_node, tasks = root, data
    if isinstance(data, dict):
        tasks_node = next((v for k, v in root.value if k.value == "tasks"), None)
        defaults_node = next((v for k, v in root.value if k.value == "defaults"), None)
        tasks, defaults = data.get("tasks"), data.get("defaults") or {}
        for key_node, _ in root.value:
            if key_node.value not in ("tasks", "defaults"):
                errors.append(
                    (
                        key_node.start_mark.line + 1,
                        f"unknown top-level key {key_node.value!r}; "
                        "a batch file has `tasks:` and optionally `defaults:`",
                    )
                )
        if tasks is None:
            errors.append((1, "no `tasks:` list: add one entry per task"))
            return [], {}, None
    if not isinstance(tasks, list):
        line = tasks_node.start_mark.line + 1 if tasks_node is not None else 1
        errors.append((line, "expected a list of tasks (each a mapping with id, goal, ...)"))
        return [], {}, None
    raws = []
    for item_node, item in zip(tasks_node.value, tasks, strict=True):
        start = item_node.start_mark.line + 1
        raws.append(RawTask(item, start, lambda loc, n=item_node, s=start: node_line(n, loc, s)))
    if defaults and not isinstance(defaults, dict):
        errors.append((defaults_node.start_mark.line + 1, "`defaults:` must be a mapping"))
        defaults = {}
    return raws, defaults, defaults_node


def read_jsonl(text: str, errors: list) -> list[RawTask]:
    raws = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append((number, f"not valid JSON: {exc.msg} (column {exc.colno})"))
            continue
        raws.append(RawTask(item, number, lambda loc, n=number: n))
    return raws
