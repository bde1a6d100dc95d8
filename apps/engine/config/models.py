"""The `models` and `llm` sections: model aliases (provider, model, prices, limits) and how
the engine calls them (main, auxiliary model, timeouts, retries, fallbacks)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from apps.engine.config.base import NonNegFloat, PositiveFloat, PositiveInt, Section


# ── models ─────────────────────────────────────────────────────────────────────────────────────
class ModelPrice(Section):
    """USD per million tokens. Cache reads and writes are priced separately."""

    input: NonNegFloat = 0.0
    output: NonNegFloat = 0.0
    cache_read: NonNegFloat = 0.0
    cache_write: NonNegFloat = 0.0


class ModelConfig(Section):
    """One model alias. `provider` picks the wire protocol: `openai` (any OpenAI-compatible
    endpoint: OpenAI, DeepSeek, Qwen/Bailian, OpenRouter, vLLM, Ollama, llama.cpp), `anthropic`,
    or `scripted` (deterministic, offline; `script` names a YAML script file)."""

    provider: Literal["openai", "anthropic", "scripted"]
    model: str = "scripted-demo"
    base_url: str | None = None
    api_key_env: str | None = Field(
        default=None, description="Name of the environment variable holding the API key."
    )
    script: str | None = Field(
        default=None, description="scripted provider: path of the script (relative to the config)."
    )
    chunk_delay_ms: NonNegFloat = Field(
        default=0.0,
        description="scripted provider: pause between streamed chunks, so a demo streams visibly.",
    )
    policy: Literal["oracle", "null", "wrong_first"] | None = Field(
        default=None,
        description="scripted provider: a reference policy instead of a script "
        "(apps/engine/evals/policies.py).",
    )
    max_tokens: PositiveInt = 4096
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    price: ModelPrice = ModelPrice()
    context_window: PositiveInt = Field(
        default=128_000,
        description=(
            "Tokens the model reads at most: sizes compression and the repository map. Left "
            "unset on an OpenAI-compatible server, agentkit reads it where the server says "
            "(llama.cpp /props, Ollama /api/show)."
        ),
    )
    tool_choice: Literal["auto", "required"] = Field(
        default="auto",
        description=(
            "auto: the model may answer in prose (a prose reply while work is undone gets one "
            "nudge); required: every agent step must be a tool call and the final answer is "
            "the tool final_answer {text} (servers then constrain calls by grammar)."
        ),
    )
    structured_output: Literal["auto", "json_schema", "tool", "prompt"] = Field(
        default="auto",
        description=(
            "How the planner gets one JSON object: json_schema (OpenAI response_format), tool "
            "(a forced tool call), prompt (ask, validate, ask again). auto: json_schema for "
            "openai, tool for anthropic, prompt for scripted."
        ),
    )
    thinking_budget: Annotated[int, Field(ge=1024)] | None = Field(
        default=None,
        description="anthropic: extended thinking with this many budget tokens (< max_tokens).",
    )

    @model_validator(mode="after")
    def _provider_needs(self) -> ModelConfig:
        if self.provider == "openai" and not self.base_url:
            raise ValueError(
                "provider 'openai' needs base_url (e.g. https://api.openai.com/v1 or "
                "http://127.0.0.1:11434/v1 for Ollama)"
            )
        if self.provider == "anthropic" and self.structured_output == "json_schema":
            raise ValueError(
                "structured_output json_schema is OpenAI's response_format; for provider "
                "'anthropic' use tool (a forced tool call), prompt, or auto"
            )
        if self.thinking_budget is not None:
            if self.provider != "anthropic":
                raise ValueError(
                    "thinking_budget applies to provider 'anthropic' only (OpenAI-compatible "
                    "reasoning models think on their own; their reasoning is shown as it comes)"
                )
            if self.thinking_budget >= self.max_tokens:
                raise ValueError(
                    f"thinking_budget ({self.thinking_budget}) must be less than max_tokens "
                    f"({self.max_tokens}): raise max_tokens or lower the budget"
                )
        if self.policy is not None and self.provider != "scripted":
            raise ValueError("`policy` (a reference model) needs provider 'scripted'")
        return self


# ── llm ────────────────────────────────────────────────────────────────────────────────────────
class TimeoutConfig(Section):
    connect: PositiveFloat = 10.0
    read: PositiveFloat = 120.0


class RetryConfig(Section):
    """Retries on 429, 5xx and connection errors; `retry-after` is honoured up to max_backoff."""

    max_attempts: PositiveInt = 3
    initial_backoff: NonNegFloat = 0.5
    max_backoff: NonNegFloat = 20.0


class LLMConfig(Section):
    main: str = "main"
    auxiliary_model: str | None = Field(
        default=None, description="Cheap model for summaries; None means use `main`."
    )
    timeout: TimeoutConfig = TimeoutConfig()
    retries: RetryConfig = RetryConfig()
    fallbacks: dict[str, list[str]] = Field(
        default_factory=dict, description="alias -> aliases tried in order when it fails."
    )
