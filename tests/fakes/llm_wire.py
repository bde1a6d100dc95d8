"""What the two wire formats of the fake LLM server share: the neutral `Answer` it writes out,
how text and tool-call arguments are cut into streamed pieces, message content as text, and the
error bodies of either protocol. The formats themselves are in llm_wire_openai.py and
llm_wire_anthropic.py; the server is in llm_server.py."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from apps.engine.llm.types import ToolCall
from tests.fakes.llm_checks import BadRequest

CHUNK = re.compile(r"\S+\s*|\s+")  # how text is cut into streamed pieces (words)


@dataclass
class Answer:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: str = "stop"  # stop | length | tool_calls
    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    thinking: str = ""  # Anthropic: a signed thinking block (when asked for); OpenAI: reasoning
    # How `text` is streamed: these exact pieces (one JSON string each, so a surrogate pair cut
    # between two arrives as two lone halves), None: cut in words (CHUNK).
    pieces: list[str] | None = None
    # How `thinking` is streamed, likewise (Fault.shaped): None: cut in words.
    thinking_cut: list[str] | None = None

    def text_pieces(self) -> list[str]:
        return list(self.pieces) if self.pieces is not None else CHUNK.findall(self.text)

    def thinking_pieces(self) -> list[str]:
        if self.thinking_cut is not None:
            return list(self.thinking_cut)
        return CHUNK.findall(self.thinking)


# ── wire → neutral ──────────────────────────────────────────────────────────────────────────────
def text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise BadRequest(f"content must be a string or a list of parts, got {type(content).__name__}")


def default_error_type(protocol: str, status: int) -> str:
    if protocol == "anthropic":
        return {
            400: "invalid_request_error",
            401: "authentication_error",
            403: "permission_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(status, "api_error")
    return {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(
        status, "server_error"
    )


def error_body(protocol: str, kind: str, message: str) -> dict[str, Any]:
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def arguments_text(call: ToolCall) -> str:
    """The arguments as the model wrote them (a forced call's text may not even be JSON)."""
    return call.raw_arguments or json.dumps(call.arguments)


def split_arguments(text: str, pieces: int = 3) -> list[str]:
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
