"""JSON schemas for structured output (`ChatRequest.structured`), in the form every endpoint takes.

`strict_schema(schema)` turns a pydantic JSON schema into the subset that OpenAI's strict
`json_schema` mode, Anthropic's tool `input_schema` and the usual OpenAI-compatible servers
(vLLM, Ollama, llama.cpp) all accept: `$ref`s inlined (no `$defs`), every object closed
(`additionalProperties: false`) with every property required (optional ones stay nullable or
empty, as the model writes them), and only the structural keywords kept — type, properties,
required, items, enum, anyOf, description. Length, pattern and count limits are left to the
caller's own validation, which runs on every answer anyway. Keys are sorted: the same bytes in
every request (prompt cache).

`structured_mode(model)` is how an alias delivers it: `models.<alias>.structured_output`, where
`auto` means `json_schema` for provider openai, `tool` for anthropic and `prompt` (ask in words,
validate, ask again) for the scripted provider.
"""

from __future__ import annotations

from typing import Any, Literal

from apps.engine.config import ModelConfig
from apps.engine.llm.errors import names_capability  # noqa: F401  (re-exported for callers)

StructuredMode = Literal["json_schema", "tool", "prompt"]
KEPT = frozenset(
    {"type", "properties", "required", "items", "enum", "anyOf", "description", "const"}
)
AUTO: dict[str, StructuredMode] = {"openai": "json_schema", "anthropic": "tool"}


# What worked per alias in this process (the planner's step-down: json_schema → tool → prompt):
# the next request on the alias starts there instead of being refused again.
_WORKED: dict[str, StructuredMode] = {}
STEPS: tuple[StructuredMode, ...] = ("json_schema", "tool", "prompt")


def memory_key(alias: str, model: ModelConfig | None) -> str:
    """An alias with its endpoint and model: another server under the same name (a changed
    agentkit.yaml) starts afresh."""
    if model is None:
        return alias
    return f"{alias} {model.provider} {model.base_url or ''} {model.model}"


def remembered_mode(alias: str) -> StructuredMode | None:
    return _WORKED.get(alias)


def remember_mode(alias: str, mode: StructuredMode) -> None:
    _WORKED[alias] = mode


def forget_modes() -> None:
    """Forget every alias's path (tests; a changed agentkit.yaml)."""
    _WORKED.clear()


def step_down(mode: StructuredMode, refusal: Any = "") -> StructuredMode | None:
    """The next way to ask after `mode` was refused (None: none left). A refusal that names
    tool_choice or tools skips the forced tool."""
    text = str(refusal or "").lower()
    if mode == "json_schema" and ("tool_choice" in text or '"tools"' in text):
        return "prompt"
    index = STEPS.index(mode)
    return STEPS[index + 1] if index + 1 < len(STEPS) else None


def structured_mode(model: ModelConfig, wanted: str | None = None) -> StructuredMode:
    """`wanted` (the request's own mode, StructuredOutput.mode) first, else the alias's."""
    if wanted in STEPS:
        return wanted  # type: ignore[return-value]
    if model.structured_output != "auto":
        return model.structured_output
    return AUTO.get(model.provider, "prompt")


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema in the strict, portable subset described above."""
    definitions = schema.get("$defs") or {}
    return _strict(schema, definitions, depth=0)


def _strict(node: Any, definitions: dict[str, Any], depth: int) -> Any:
    if depth > 32:
        raise ValueError("schema nests too deeply (a recursive $ref?)")
    if isinstance(node, list):
        return [_strict(item, definitions, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _strict(definitions[ref.removeprefix("#/$defs/")], definitions, depth + 1)
    out: dict[str, Any] = {}
    for key in sorted(node):
        if key not in KEPT:
            continue
        value = node[key]
        if key == "properties":
            out[key] = {
                name: _strict(value[name], definitions, depth + 1) for name in sorted(value)
            }
        elif key in {"items", "anyOf"}:
            out[key] = _strict(value, definitions, depth + 1)
        else:
            out[key] = value
    if out.get("type") == "object" or "properties" in out:
        out["additionalProperties"] = False
        out["required"] = sorted(out.get("properties") or {})
        out = {key: out[key] for key in sorted(out)}
    return out
