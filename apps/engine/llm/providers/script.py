"""The `scripted` provider's script (scripted.py): its format, validated, and loading it from
a file (cached by path, modification time and size) or from Python data.

Script format (YAML file, or the same structure as Python lists and dicts)
--------------------------------------------------------------------------
A list of turns (or a mapping `{description: ..., turns: [...]}`). A turn is a string (a text
reply) or a mapping:

    - text: "Let me read the function."      # assistant text (may come with tool calls)
      thinking: "The bug is in slugify."      # optional: the model's reasoning, streamed first
                                              # as reasoning deltas (the fake LLM server sends
                                              # it as signed thinking / reasoning_content)
      tool_calls:                             # optional
        - name: read_file
          arguments: {path: textkit/slug.py, symbol: slugify}
          id: call_1                          # optional; default call_<n>_<i>
      # conditions, all optional; a turn answers a call only when all of them hold:
      match: '(?i)slug'        # regex searched in the last user or tool message
      role: user               # that message's role: user | tool
      after_tool: read_file    # that message is the result of this tool
      tool_error: false        # ...and the tool did (true) or did not (false) report an error
      only_if_offered: true    # every tool this turn calls is among the request's tools
      # behaviour, optional:
      repeat: true             # may answer any number of calls (default: used once)
      fail: rate_limit         # server_error | rate_limit | auth | context_window | timeout |
                               # connection | empty. With `text`, the text streams first and
                               # the call fails mid-stream.
      finish_reason: stop      # default: tool_calls when calling tools, else stop
      usage: {input_tokens: 1200, output_tokens: 40, cache_read_tokens: 1000}  # else estimated

Each call is answered by the first turn, in script order, that is still available and whose
conditions hold. Turns without conditions therefore answer calls one after the other; turns
with conditions (and `repeat: true`) let one script drive a whole multi-step session in
whatever order the calls come. When no turn is left, `ScriptExhaustedError` says which call it
was, what the last message said, and how to extend the script.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from apps.engine.llm.errors import LLMConfigurationError

SCRIPTS_DIR = Path(__file__).resolve().parent.parent / "scripts"
DEMO_SCRIPT = SCRIPTS_DIR / "demo.yaml"

FailKind = Literal[
    "server_error", "rate_limit", "auth", "context_window", "timeout", "connection", "empty"
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptToolCall(_Strict):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ScriptUsage(_Strict):
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)


class ScriptTurn(_Strict):
    text: str = ""
    thinking: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    match: str | None = None
    role: Literal["user", "tool"] | None = None
    after_tool: str | None = None
    tool_error: bool | None = None
    only_if_offered: bool = False
    repeat: bool = False
    fail: FailKind | None = None
    finish_reason: str | None = None
    usage: ScriptUsage | None = None

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _says_something(self) -> ScriptTurn:
        if not self.text and not self.tool_calls and self.fail is None:
            raise ValueError(
                "a turn needs `text`, `tool_calls` or `fail` (use `fail: empty` for an empty answer)"
            )
        return self

    def describe(self) -> str:
        if self.tool_calls:
            return "calls " + ", ".join(call.name for call in self.tool_calls)
        if self.fail:
            return f"fails with {self.fail}"
        return f"says {clip(self.text, 40)!r}"


class Script(_Strict):
    turns: list[ScriptTurn] = Field(min_length=1)
    description: str = ""
    source: str = "(inline script)"


def load_script(source: str | Path | Sequence[Any] | dict[str, Any] | Script) -> Script:
    """A validated Script from a YAML file path, or from already-parsed data (list of turns, or
    a mapping with `turns`). Raises LLMConfigurationError naming the file and the bad field."""
    if isinstance(source, Script):
        return source
    if isinstance(source, str | Path):
        path = Path(source)
        stat = _stat(path)
        return _load_file(str(path.resolve()), stat)
    return _validate(source, "(inline script)")


def _stat(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except OSError as exc:
        raise LLMConfigurationError(
            f"scripted model: cannot read script {path}: {exc.strerror or exc}. Check "
            f"models.<alias>.script (relative paths resolve against agentkit.yaml's folder)."
        ) from None
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=32)
def _load_file(path: str, stat: tuple[int, int]) -> Script:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise LLMConfigurationError(f"scripted model: cannot parse script {path}: {exc}") from None
    return _validate(data, path)


def _validate(data: Any, source: str) -> Script:
    if isinstance(data, list | tuple):
        data = {"turns": list(data)}
    if not isinstance(data, dict):
        raise LLMConfigurationError(
            f"scripted model: script {source} must be a list of turns, got {type(data).__name__}"
        )
    turns = [{"text": t} if isinstance(t, str) else t for t in data.get("turns") or []]
    try:
        return Script.model_validate({**data, "turns": turns, "source": source})
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "(top level)"
            lines.append(f"  {where}: {error['msg'].removeprefix('Value error, ')}")
        raise LLMConfigurationError(
            f"scripted model: script {source} is invalid:\n" + "\n".join(lines)
        ) from None


def clip(text: str, length: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= length else text[: length - 1] + "…"
