"""The sections that shape a run: `skills`, `modes`, `react` (max_steps, loop detection),
`prompt_cache`, `repo_map`, `compression`, `streaming`, `limits`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from apps.engine.config.base import NonNegInt, PositiveFloat, PositiveInt, Section


# ── skills / modes ───────────────────────────────────────────────────────────────────
class SkillConfig(Section):
    description: str = ""
    system_prompt: str = ""
    tools: list[str] | None = Field(default=None, description="None = every tool of the mode.")
    model: str | None = Field(default=None, description="Model alias; None = llm.main.")
    default_mode: Literal["direct_chat", "react", "plan_exec", "team_collab"] | None = None
    verification_commands: list[str] = Field(default_factory=list)


class ModeVerification(Section):
    direct_chat: bool = False
    react: bool = False
    plan_exec: bool = True
    team_collab: bool = True


class ModesConfig(Section):
    default: Literal["direct_chat", "react", "plan_exec", "team_collab"] = "react"


# ── the loop ───────────────────────────────────────────────────────────────────────────────────
class LoopDetectionConfig(Section):
    enabled: bool = True
    repeat_threshold: PositiveInt = 3  # same action + same observation N times
    error_threshold: PositiveInt = 3  # same action ending in an error N times
    monologue_threshold: PositiveInt = 4  # replies without any action in a row
    alternation_window: PositiveInt = 6  # A/B/A/B... over this many steps


class ReactConfig(Section):
    max_steps: PositiveInt = 30
    max_wall_seconds: PositiveFloat = 1800.0
    tool_output_max_chars: PositiveInt = 10_000
    loop_detection: LoopDetectionConfig = LoopDetectionConfig()
    step_wall_seconds: PositiveFloat | None = Field(
        default=300.0,
        description=(
            "One model call's wall-time limit (its whole reply); past it the reply is cut and "
            "the model told so (loop/runaway.py). null: no limit but max_wall_seconds."
        ),
    )
    repetition_guard: bool = Field(
        default=True,
        description="Cut a streamed reply that repeats the same line or stretch of text.",
    )
    step_temperature: Annotated[float, Field(ge=0, le=2)] | None = Field(
        default=0.2,
        description=(
            "Sampling temperature of agent, plan and team steps when the model alias sets none "
            "(a server's default, 0.8 on llama.cpp, makes small models babble); an alias's "
            "`temperature` overrides it; not sent to reasoning models that refuse it; null: the "
            "server's default."
        ),
    )


class PromptCacheConfig(Section):
    """Stable system block with a cache breakpoint, volatile block after it, and (Anthropic) a
    breakpoint that moves with the conversation. False: the same text, no breakpoints."""

    enabled: bool = True


class RepoMapConfig(Section):
    """The repository map (apps/tools/builtin/repo_map.py): the workspace's paths and top-level
    definitions, built by the runner at task start, in the system prompt after the stable block."""

    enabled: bool = True
    max_tokens: PositiveInt = 1024  # cap on the map's size (4 characters a token)
    time_limit_seconds: PositiveFloat = 2.0  # the walk stops here; the map says it is partial


class CompressionConfig(Section):
    """Context compression (apps/engine/context/compressor.py): past `threshold_tokens` the middle of the
    conversation is replaced by a structured summary, asked of `llm.auxiliary_model` first."""

    enabled: bool = True
    threshold_tokens: PositiveInt | None = Field(
        default=None, description="Prompt size that triggers it; None = half the context_window."
    )
    keep_first: PositiveInt = 2  # messages kept at the start (the task's goal)
    keep_last: PositiveInt = 8  # most recent messages kept verbatim
    summary_max_tokens: PositiveInt = 1024
    summary_input_max_chars: PositiveInt = 120_000  # of the middle shown to the summarizer


class StreamingConfig(Section):
    flush_interval_ms: NonNegInt = 50


class LimitsConfig(Section):
    # An answer longer than this is stored once in full (the task's result); its final_answer
    # and task_finished events carry the first answer_chars characters, a marker and its length.
    answer_chars: PositiveInt = 200_000
