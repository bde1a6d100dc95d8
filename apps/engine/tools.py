"""Tools the agent can call: the `Tool` base class, `ToolResult`, and `ToolSet`.

A tool's `input_schema` is a JSON Schema checked once when the class is created, and compiled
then: a jsonschema validator, and a fast proof of validity for the common keywords
(schema_check.py) that lets valid arguments skip the validator. `ToolSet.safe_execute` validates
the model's arguments against it before running the tool, and turns every problem into a
`ToolResult` error the model sees next (typed `error_code`), so the loop continues:

- unknown tool                         -> unknown_tool
- argument of the wrong type / value   -> tool_call_invalid
- missing required / unexpected field  -> schema_mismatch
- exception raised inside the tool     -> tool_execution_error

A schema that does not say `additionalProperties` is checked as if it said `false`: `execute`
takes the properties as keyword arguments, so an unexpected one is a mistake of the model.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, ClassVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from apps.engine.llm.text import storable, storable_value
from apps.engine.llm.types import ToolSpec
from apps.engine.loop.schema_check import Check, compile_check

log = logging.getLogger(__name__)

DEFAULT_MAX_OUTPUT_CHARS = 10_000


@dataclass(slots=True)
class ToolResult:
    ok: bool
    output: str = ""
    error: str | None = None
    error_code: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    # Positional: a tool makes one per call, and keywords cost the generated __init__ more.
    @classmethod
    def success(cls, output: str, **data: Any) -> ToolResult:
        return cls(True, output, None, None, data)

    @classmethod
    def failure(cls, error_code: str, error: str, output: str = "", **data: Any) -> ToolResult:
        return cls(False, output, error, error_code, data)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "output": self.output,
            "error": self.error,
            "error_code": self.error_code,
            "data": self.data,
        }

    def for_model(self) -> str:
        """The text the model sees as the tool message."""
        if self.ok:
            return self.output
        text = f"ERROR [{self.error_code}]: {self.error}"
        return f"{text}\n{self.output}" if self.output else text


class ToolValidationError(Exception):
    """Arguments that do not fit a tool's schema. Carries the typed code and a message for the model."""

    def __init__(self, error_code: str, message: str):
        super().__init__(message)
        self.error_code = error_code
        self.message = message


class Tool:
    """Subclass with `name`, `description`, `input_schema` and `async execute(**arguments)`."""

    name: ClassVar[str]
    description: ClassVar[str]
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}
    _validator: ClassVar[Draft202012Validator]
    _valid: ClassVar[Check | None] = None  # fast proof of validity (schema_check.py), if any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if getattr(cls, "__abstract__", False) or "name" not in cls.__dict__:
            return
        try:
            Draft202012Validator.check_schema(cls.input_schema)
        except SchemaError as exc:
            raise TypeError(
                f"tool {cls.name!r} has an invalid input_schema: {exc.message}"
            ) from exc
        if cls.input_schema.get("type") != "object":
            raise TypeError(f"tool {cls.name!r}: input_schema must describe an object")
        checked = cls.input_schema
        if "additionalProperties" not in checked:
            checked = {**checked, "additionalProperties": False}
        cls._validator = Draft202012Validator(checked)
        cls._valid = compile_check(checked)

    async def execute(self, **arguments: Any) -> ToolResult:  # pragma: no cover - interface
        raise NotImplementedError

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema)

    def validate(self, arguments: Any) -> None:
        valid = type(self)._valid  # through the class: a plain function, not a bound method
        if valid is not None and valid(arguments):
            return  # certainly valid; anything else goes to the full validator below
        if not isinstance(arguments, dict):
            raise ToolValidationError(
                "tool_call_invalid",
                f"arguments must be a JSON object, got {type(arguments).__name__}",
            )
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.path))
        if not errors:
            return
        structural = [e for e in errors if e.validator in {"required", "additionalProperties"}]
        code = "schema_mismatch" if structural else "tool_call_invalid"
        lines = []
        for err in errors[:5]:
            where = ".".join(str(p) for p in err.path) or "(arguments)"
            lines.append(f"{where}: {err.message}")
        allowed = sorted(self.input_schema.get("properties", {}))
        required = self.input_schema.get("required", [])
        hint = f"Expected properties: {', '.join(allowed) or 'none'}"
        if required:
            hint += f"; required: {', '.join(required)}"
        raise ToolValidationError(code, "; ".join(lines) + f". {hint}.")


def truncate_output(text: str, max_chars: int = DEFAULT_MAX_OUTPUT_CHARS) -> str:
    """Keep head and tail of a long output, with a note telling the model how to narrow it."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    omitted = len(text) - head - tail
    note = (
        f"\n\n[... {omitted} characters omitted of {len(text)}. Narrow the output: read a line "
        f"range or a symbol, grep for what you need, or pipe through head/tail ...]\n\n"
    )
    return text[:head] + note + text[-tail:]


def is_glob(name: str) -> bool:
    """A tool-name pattern (`git__*`) rather than a name: skills' tools and phase whitelists."""
    return any(char in name for char in "*?[")


def expand_tool_names(wanted: Iterable[str], known: Iterable[str]) -> tuple[list[str], list[str]]:
    """(names, unmatched): each wanted name that is known, and each known name a wanted glob
    matches, in order, once; unmatched: the wanted names and globs that match nothing."""
    known = sorted(known)
    names: dict[str, None] = {}
    unmatched: list[str] = []
    for entry in wanted:
        found = [n for n in known if fnmatchcase(n, entry)] if is_glob(entry) else None
        if found is None:
            found = [entry] if entry in known else []
        if not found:
            unmatched.append(entry)
        names.update(dict.fromkeys(found))
    return list(names), unmatched


class ToolSet:
    """The tools of one run, looked up by name; specs are sorted by name for prompt-cache stability."""

    def __init__(
        self, tools: Iterable[Tool] = (), *, max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS
    ):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"duplicate tool name {tool.name!r}")
            self._tools[tool.name] = tool
        self.max_output_chars = max_output_chars

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(self._tools[name].spec() for name in sorted(self._tools))

    def subset(self, names: Iterable[str], *, max_output_chars: int | None = None) -> ToolSet:
        """The named tools (every name must exist), optionally with another output limit."""
        wanted = set(names)
        missing = sorted(wanted - set(self._tools))
        if missing:
            raise ValueError(
                f"unknown tool name(s) {', '.join(missing)}; known: {', '.join(self.names())}"
            )
        return ToolSet(
            (tool for name, tool in self._tools.items() if name in wanted),
            max_output_chars=max_output_chars or self.max_output_chars,
        )

    async def safe_execute(
        self, name: str, arguments: Any, *, arguments_error: str | None = None
    ) -> ToolResult:
        """Validate, run, and truncate. Model mistakes become results; engine bugs propagate only
        when they are not inside the tool (an exception inside a tool is the tool's failure).
        `arguments_error`: the model's argument text could not be parsed (the gateway says why).
        The result is storable (llm/text.py): a NUL a command printed, a file name that is not
        UTF-8 (a surrogate escape) become U+FFFD in its output, error and data."""
        result = await self._execute(name, arguments, arguments_error)
        result.output = storable(result.output)
        if result.error is not None:
            result.error = storable(result.error)
        result.data = storable_value(result.data)
        return result

    async def _execute(self, name: str, arguments: Any, arguments_error: str | None) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult.failure(
                "unknown_tool",
                f"there is no tool named {name!r}. Available tools: {', '.join(self.names())}.",
            )
        if arguments_error is not None:
            return ToolResult.failure(
                "tool_call_invalid",
                f"arguments are not a valid JSON object ({arguments_error}). Send one JSON "
                f"object that matches the input_schema of {name!r}.",
            )
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return ToolResult.failure(
                    "tool_call_invalid", f"arguments are not valid JSON ({exc.msg} at {exc.pos})."
                )
        try:
            tool.validate(arguments)
        except ToolValidationError as exc:
            return ToolResult.failure(exc.error_code, exc.message)
        try:
            result = await tool.execute(**arguments)
        except Exception as exc:  # the tool's own failure is an observation for the model
            log.warning("tool %s raised %s", name, type(exc).__name__, exc_info=True)
            return ToolResult.failure("tool_execution_error", f"{type(exc).__name__}: {exc}")
        if len(result.output) > self.max_output_chars:
            result.output = truncate_output(result.output, self.max_output_chars)
            result.data.setdefault("truncated", True)
        if result.error is not None and len(result.error) > self.max_output_chars:
            result.error = truncate_output(result.error, self.max_output_chars)
        return result
