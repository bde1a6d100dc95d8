"""The name the model sees for an MCP tool: `<server>__<tool>`, only [a-zA-Z0-9_-], at most 64
characters (OpenAI's and Anthropic's limit); a longer or rewritten name ends in a short hash of
the original so two tools never share one."""

from __future__ import annotations

import hashlib
import re

SEPARATOR = "__"
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def exposed_name(server: str, tool: str) -> str:
    safe = _UNSAFE.sub("_", tool)
    name = f"{server}{SEPARATOR}{safe}"
    if safe == tool and len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha1(tool.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def server_of(name: str) -> str | None:
    """The server part of an exposed name, or None for a builtin tool."""
    server, sep, rest = name.partition(SEPARATOR)
    return server if sep and rest else None
