"""Provider-neutral LLM types. Providers translate to and from these; the engine sees only these.

Plain dataclasses (not pydantic): they are built on every streamed chunk and every loop step.
"""

from __future__ import annotations

import json
import json.encoder
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


# Prefix of the ids agentkit makes up for tool calls that arrived without one (some
# OpenAI-compatible servers omit it). Such calls also carry `synthetic_id=True`.
SYNTHETIC_ID_PREFIX = "synth_"


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # The argument text as the model sent it; kept when it is not valid JSON so the engine can
    # tell the model exactly what was wrong instead of guessing.
    raw_arguments: str = ""
    arguments_error: str | None = None
    # True when the model sent no id and agentkit made one up (`SYNTHETIC_ID_PREFIX` + random
    # hex + position); the made-up id is still sent back with the tool's result.
    synthetic_id: bool = False


_sorted_json = json.JSONEncoder(sort_keys=True).encode  # json.dumps(..., sort_keys=True)
# The C encoder json.dumps(..., sort_keys=True) makes on every call, made once (CPython): the
# same text, without the Python layers around it. No circular-reference bookkeeping: anything
# it cannot encode (a cycle included) goes to _sorted_json, which raises what json.dumps does.
_c_encoder = (
    json.encoder.c_make_encoder(
        None,  # markers: no circular check
        _sorted_json.__self__.default,
        json.encoder.encode_basestring_ascii,
        None,  # indent
        ": ",
        ", ",
        True,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )
    if json.encoder.c_make_encoder is not None
    else None
)
_last_sorted: tuple[object, str] = (None, "")


def sorted_json(value: Any) -> str:
    """json.dumps(value, sort_keys=True)."""
    if _c_encoder is not None:
        try:
            return "".join(_c_encoder(value, 0))
        except Exception:  # the plain path below raises json.dumps's own error
            pass
    return _sorted_json(value)


def sorted_arguments(call: ToolCall) -> str:
    """`json.dumps(call.arguments, sort_keys=True)`. The engine needs it twice a call, a step
    apart (loop detection, then the prompt's size), so the text of the latest call is kept and
    given again for the same call: a ToolCall and its arguments are not changed once made."""
    global _last_sorted
    last, text = _last_sorted
    if last is not call:
        text = sorted_json(call.arguments)
        _last_sorted = (call, text)
    return text


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """A block of the model's own reasoning that the provider wants back, byte for byte.

    Anthropic extended thinking: `kind` "thinking" (the text and its `signature`) or
    "redacted_thinking" (encrypted `data`). Across a tool-use turn the next request's assistant
    message must carry these blocks first, unmodified (providers/anthropic.py). Reasoning that
    must never be sent back (OpenAI-compatible `reasoning_content`) is not one of these: it is
    `ChatResponse.reasoning`, for display only."""

    kind: Literal["thinking", "redacted_thinking"]
    thinking: str = ""
    signature: str = ""
    data: str = ""


@dataclass(frozen=True, slots=True)
class TextBlock:
    """A block of a system prompt. `cache` marks a prompt-cache breakpoint after this block
    (Anthropic `cache_control`); OpenAI-compatible providers concatenate blocks in order, joined
    by a blank line, and rely on the endpoint's automatic prefix cache."""

    text: str
    cache: bool = False


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool": the call this answers
    name: str | None = None  # role == "tool": the tool's name
    is_error: bool = False  # role == "tool": the tool reported an error
    # role == "assistant": the reasoning blocks its reply began with, sent back unmodified
    thinking: tuple[ThinkingBlock, ...] = ()

    # Written out (dataclass keeps an __init__ of the class body): the generated one of a frozen
    # dataclass calls object.__setattr__ per field; setting the slots through their descriptors
    # is about a third cheaper, and the engine makes messages every step. Same signature and
    # defaults as the fields (tests/engine/test_hot_path.py checks).
    def __init__(
        self,
        role: Role,
        content: str = "",
        tool_calls: tuple[ToolCall, ...] = (),
        tool_call_id: str | None = None,
        name: str | None = None,
        is_error: bool = False,
        thinking: tuple[ThinkingBlock, ...] = (),
    ) -> None:
        _message_role(self, role)
        _message_content(self, content)
        _message_tool_calls(self, tool_calls)
        _message_tool_call_id(self, tool_call_id)
        _message_name(self, name)
        _message_is_error(self, is_error)
        _message_thinking(self, thinking)


(
    _message_role,
    _message_content,
    _message_tool_calls,
    _message_tool_call_id,
    _message_name,
    _message_is_error,
    _message_thinking,
) = (Message.__dict__[name].__set__ for name in Message.__slots__)


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0  # all prompt tokens, cached ones included
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def add(self, other: Usage) -> None:
        """self += other, in place (`+=` makes a new Usage)."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True, slots=True)
class StructuredOutput:
    """Ask for one JSON object of this schema as the answer. Each provider uses what its
    endpoint has (`models.<alias>.structured_output`): OpenAI `response_format: json_schema`,
    or a forced call of a tool named `name` (Anthropic; OpenAI-compatible servers without
    json_schema). The object comes back as the reply's text, or as that tool call's arguments
    (`ChatResponse.structured_text()` gives either). The caller still validates it."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: tuple[Message, ...]
    system: tuple[TextBlock, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    structured: StructuredOutput | None = None

    def __init__(  # written out as Message's, for the same reason: one per model call
        self,
        messages: tuple[Message, ...],
        system: tuple[TextBlock, ...] = (),
        tools: tuple[ToolSpec, ...] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
        structured: StructuredOutput | None = None,
    ) -> None:
        _request_messages(self, messages)
        _request_system(self, system)
        _request_tools(self, tools)
        _request_max_tokens(self, max_tokens)
        _request_temperature(self, temperature)
        _request_structured(self, structured)


(
    _request_messages,
    _request_system,
    _request_tools,
    _request_max_tokens,
    _request_temperature,
    _request_structured,
) = (ChatRequest.__dict__[name].__set__ for name in ChatRequest.__slots__)


@dataclass(slots=True)
class ChatResponse:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""
    alias: str = ""
    request_id: str | None = None
    cost: float = 0.0
    attempts: int = 1  # HTTP calls this answer took, retries and fallbacks included
    # Blocks to send back with this reply on the next turn (Anthropic thinking, signed).
    thinking: tuple[ThinkingBlock, ...] = ()
    # The model's reasoning as text, for people (Anthropic thinking text, OpenAI-compatible
    # `reasoning_content` / `reasoning`): shown and counted, never sent back by itself.
    reasoning: str = ""

    def structured_text(self, name: str) -> str:
        """The JSON text of a structured answer: the arguments of the first call of tool
        `name` (a forced tool call), else the reply's text (json_schema, or no structured
        output at all)."""
        for call in self.tool_calls:
            if call.name == name:
                return call.raw_arguments or sorted_json(call.arguments)
        return self.content


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """One item of a streamed completion: visible text as it arrives (`reasoning`: the model's
    reasoning text, shown apart from its answer); the last item carries the complete `response`
    (text, tool calls, usage) and nothing else.

    `restart=True` (no text, no response) means the call failed after some text was streamed and
    is being retried or handed to a fallback model: drop the text shown so far. The final
    `response` is always the whole answer of the attempt that succeeded.
    """

    text: str = ""
    response: ChatResponse | None = None
    restart: bool = False
    reasoning: str = ""
