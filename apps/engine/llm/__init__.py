"""The LLM layer: neutral types, one gateway, three providers (openai, anthropic, scripted).

Framework-free. The engine imports from here; provider modules are an implementation detail.
"""

from apps.engine.llm.errors import (
    AuthenticationError,
    ContextWindowError,
    EmptyResponseError,
    LLMConfigurationError,
    LLMConnectionError,
    LLMError,
    LLMStatusError,
    LLMTimeoutError,
    RateLimitError,
    ScriptExhaustedError,
)
from apps.engine.llm.gateway import Gateway, cost_of
from apps.engine.llm.providers.script import DEMO_SCRIPT, Script, load_script
from apps.engine.llm.providers.scripted import ScriptedProvider
from apps.engine.llm.types import (
    ChatRequest,
    ChatResponse,
    Message,
    Role,
    StreamDelta,
    TextBlock,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "DEMO_SCRIPT",
    "AuthenticationError",
    "ChatRequest",
    "ChatResponse",
    "ContextWindowError",
    "EmptyResponseError",
    "Gateway",
    "LLMConfigurationError",
    "LLMConnectionError",
    "LLMError",
    "LLMStatusError",
    "LLMTimeoutError",
    "Message",
    "RateLimitError",
    "Role",
    "Script",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "StreamDelta",
    "TextBlock",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "cost_of",
    "load_script",
]
