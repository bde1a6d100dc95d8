"""What the fake LLM server refuses beyond a request's shape, as the services do: changed or
missing thinking blocks (Anthropic extended thinking across a tool-use turn), reasoning sent back
(DeepSeek), and structured-output requests (OpenAI `response_format`, `tool_choice`). Pure
functions; llm_wire_anthropic.py calls the thinking checks while it reads a request,
llm_server.py the structured-output ones."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status = status
        self.kind = kind


# ── thinking signatures ─────────────────────────────────────────────────────────────────────────
_SIGNING_KEY = b"fake-llm-server thinking key"
THINKING_MISSING = (
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
    "disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
REASONING_SENT_BACK = (
    "The reasoning_content is an intermediate result for display purposes only and will not be "
    "included in the context for inference. Please remove the reasoning_content from your input "
    "messages."
)


def thinking_signature(thinking: str) -> str:
    """The signature the fake gives a thinking text: any change to the text breaks it."""
    digest = hashlib.sha256(_SIGNING_KEY + thinking.encode()).digest()
    return base64.b64encode(digest).decode()


def redacted_data(thinking: str) -> str:
    """A `redacted_thinking` block's opaque `data` as the fake issues (and later checks) it."""
    payload = json.dumps({"sig": thinking_signature(thinking), "thinking": thinking})
    return base64.b64encode(payload.encode()).decode()


def redacted_ok(data: Any) -> bool:
    try:
        payload = json.loads(base64.b64decode(str(data), validate=True))
        return payload["sig"] == thinking_signature(payload["thinking"])
    except (ValueError, KeyError, TypeError):
        return False


def thinking_enabled(body: dict[str, Any]) -> bool:
    """Anthropic `thinking: {type: enabled, budget_tokens}`, checked as the API checks it."""
    thinking = body.get("thinking")
    if thinking is None or (isinstance(thinking, dict) and thinking.get("type") == "disabled"):
        return False
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        raise BadRequest("thinking: Input tag does not match any of the expected tags")
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        raise BadRequest(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
        )
    if budget >= body.get("max_tokens", 0):
        raise BadRequest("`max_tokens` must be greater than `thinking.budget_tokens`.")
    if body.get("temperature") not in (None, 1, 1.0):
        raise BadRequest("`temperature` may only be set to 1 when thinking is enabled.")
    return True


# ── structured output ─────────────────────────────────────────────────────────────────────────
JSON_SCHEMA_UNAVAILABLE = "This response_format type is unavailable now"  # DeepSeek's words


def _strict_problems(schema: Any, where: str = "()") -> list[str]:
    """What OpenAI's strict mode refuses in a schema: open objects, optional properties."""
    problems: list[str] = []
    if isinstance(schema, dict):
        properties = schema.get("properties")
        if schema.get("type") == "object" or isinstance(properties, dict):
            if schema.get("additionalProperties") is not False:
                problems.append(
                    f"In context={where}, 'additionalProperties' is required to be supplied "
                    "and to be false."
                )
            missing = sorted(set(properties or {}) - set(schema.get("required") or []))
            if missing:
                problems.append(
                    f"In context={where}, 'required' is required to be supplied and to be an "
                    f"array including every key in properties. Missing '{missing[0]}'."
                )
        if "$defs" in schema or "$ref" in schema:
            pass  # allowed by OpenAI; the client's schema never has them anyway
        for key, value in schema.items():
            if key in {"properties", "$defs"} and isinstance(value, dict):
                for name, sub in value.items():
                    problems += _strict_problems(sub, f"{where[:-1]}, '{key}', '{name}')")
            elif key in {"items", "anyOf"}:
                problems += _strict_problems(value, f"{where[:-1]}, '{key}')")
    elif isinstance(schema, list):
        for item in schema:
            problems += _strict_problems(item, where)
    return problems


NULL_CONTENT_REFUSED = (
    "Failed to parse messages: content must be a string (got null)"  # a llama.cpp-family server
)


def check_null_content(body: dict[str, Any]) -> None:
    """An assistant message with `content: null` beside `tool_calls`, refused with HTTP 500 as
    one llama.cpp-family server refuses it (OpenAI accepts it)."""
    for message in body.get("messages") or []:
        if isinstance(message, dict) and "content" in message and message["content"] is None:
            raise BadRequest(NULL_CONTENT_REFUSED, 500, "server_error")


def check_response_format(
    body: dict[str, Any], json_schema_supported: bool, refusal_status: int = 400
) -> None:
    """OpenAI `response_format`, checked as the service checks it; refused with
    `refusal_status` (a llama.cpp-family server: 500) when json_schema is not supported."""
    wanted = body.get("response_format")
    if wanted is None:
        return
    if not isinstance(wanted, dict) or wanted.get("type") not in {
        "text",
        "json_object",
        "json_schema",
    }:
        raise BadRequest("Invalid value for 'response_format.type'.")
    if wanted["type"] != "json_schema":
        return
    if not json_schema_supported:
        if refusal_status >= 500:
            raise BadRequest(
                f"unsupported param: response_format ({JSON_SCHEMA_UNAVAILABLE})",
                500,
                "server_error",
            )
        raise BadRequest(JSON_SCHEMA_UNAVAILABLE)
    spec = wanted.get("json_schema") or {}
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", str(spec.get("name") or "")):
        raise BadRequest("Missing required parameter: 'response_format.json_schema.name'.")
    if not isinstance(spec.get("schema"), dict):
        raise BadRequest(
            "Invalid type for 'response_format.json_schema.schema': expected an object."
        )
    if spec.get("strict"):
        problems = _strict_problems(spec["schema"])
        if problems:
            raise BadRequest(f"Invalid schema for response_format '{spec['name']}': {problems[0]}")


def forced_tool(protocol: str, body: dict[str, Any]) -> str | None:
    """The tool a request forces (`tool_choice`), checked against its tools; None: not forced."""
    choice = body.get("tool_choice")
    if choice is None or isinstance(choice, str):
        if choice == "required" and not body.get("tools"):
            raise BadRequest("'tool_choice' is only allowed when 'tools' are specified.")
        return None
    if protocol == "anthropic":
        names = [tool.get("name") for tool in body.get("tools") or []]
        if choice.get("type") in {"auto", "none"}:
            return None
        if thinking_enabled(body) and choice.get("type") in {"any", "tool"}:
            raise BadRequest("Thinking may not be enabled when tool_choice forces tool use.")
        if choice.get("type") != "tool":
            return None
        name = choice.get("name")
    else:
        names = [(tool.get("function") or {}).get("name") for tool in body.get("tools") or []]
        name = (choice.get("function") or {}).get("name")
    if name not in names:
        raise BadRequest(
            f"tool_choice: the tool {name!r} is not among the request's tools ({', '.join(map(str, names))})"
        )
    return name
