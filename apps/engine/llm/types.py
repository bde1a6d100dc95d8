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
    # json.dumps(arguments, sort_keys=True), made once with the call: loop detection and the
    # prompt's size both read it every step (a call's arguments are not changed once made)
    # (None: not JSON-serializable; sorted_arguments() then raises what json.dumps raises)
    sorted_arguments: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            text = sorted_json(self.arguments)
        except (TypeError, ValueError):
            text = None
        object.__setattr__(self, "sorted_arguments", text)


# json.dumps(value, sort_keys=True) builds this encoder on every call; one, made once, is the same
sorted_json = json.JSONEncoder(sort_keys=True).encode
"""json.dumps(value, sort_keys=True): the same bytes for the same value (prompt caching)."""


def sorted_arguments(call: ToolCall) -> str:
    """`json.dumps(call.arguments, sort_keys=True)`: a call's arguments as the model sees them."""
    text = call.sorted_arguments
    return sorted_json(call.arguments) if text is None else text


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


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0  # all prompt tokens, cached ones included
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    # True when a server reported no usage and the counts were estimated from the text
    # (gateway.py): shown with "~"
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.estimated or other.estimated,
        )

    def add(self, other: Usage) -> None:
        """self += other, in place (`+=` makes a new Usage)."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.estimated = self.estimated or other.estimated

    def as_dict(self) -> dict[str, int]:
        """The counts; `estimated: True` joins them only when some were estimated."""
        data = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }
        if self.estimated:
            data["estimated"] = True
        return data


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
    # How to ask for it (json_schema | tool | prompt); None: the alias's own
    # (`models.<alias>.structured_output`, structured.py). The planner steps it down.
    mode: str | None = None


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: tuple[Message, ...]
    system: tuple[TextBlock, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    structured: StructuredOutput | None = None
    # "required": the reply must be a call of one of `tools` (servers that constrain output by
    # grammar then make it a schema-valid one); None: the model may answer in text
    tool_choice: str | None = None
    # The temperature when neither `temperature` nor the alias sets one (agent steps: low)
    default_temperature: float | None = None


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

    `call`: a tool call as it streams — its name as it starts, then its argument text — for
    progress only (the wall limit, `check_llm --agent`'s live view); never text, and the calls
    themselves come whole in `response`.
    """

    text: str = ""
    response: ChatResponse | None = None
    restart: bool = False
    reasoning: str = ""
    call: str = ""
