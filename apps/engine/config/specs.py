"""The specs sections of agentkit.yaml (`spec_review`, `planner`), kept apart from the rest.

Framework-free, like the rest of this package; `loading.AgentkitConfig` adds them to `AgentkitConfig`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpecReviewConfig(_Section):
    """The review gate of plan_exec (apps/engine/plan/spec_stage.py): a person confirms or rejects the
    planner's spec before anything runs."""

    enabled: bool = Field(default=True, description="false: the confirmed spec is not awaited.")
    timeout_seconds: float = Field(
        default=1800, gt=0, description="No decision within this time: spec and task parked."
    )
    poll_interval_ms: int = Field(
        default=500, ge=20, le=10_000, description="How often a waiting run reads the decision."
    )


class PlannerConfig(_Section):
    """The planner (apps/engine/plan/planner.py): goal -> spec by structured output."""

    max_attempts: int = Field(
        default=3, ge=1, le=10, description="Replies asked for before the spec is invalid_spec."
    )
    max_tokens: int = Field(default=4096, ge=256, description="Per planner reply.")
