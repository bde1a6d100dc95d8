"""The quality loop's sections: `verification`, `reflexion`, `plan_exec` (phases, whitelists,
budgets) and `fallback_chain` (Recovery, Emergency)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from apps.engine.config.agent import ModeVerification
from apps.engine.config.base import NonNegInt, PositiveFloat, PositiveInt, Section


class VerificationConfig(Section):
    modes: ModeVerification = ModeVerification()
    # react in a coding workspace (tests/ or a pyproject.toml): a task that changed files runs
    # the workspace's checks before it may complete, even with modes.react off.
    react_when_changed: bool = True
    max_reinjections: NonNegInt = 1
    timeout_seconds: PositiveFloat = 600.0
    python_commands: list[str] = Field(default_factory=lambda: ["pytest -x -q", "ruff check"])
    # What already failed when the task started does not fail it (apps/engine/plan/verify/baseline.py).
    baseline: bool = True
    # The baseline's own budget: it runs beside the task's first steps, on a copy of the
    # workspace as it was at the start; a check that hangs there is recorded as timed out. Also
    # the budget of the start's lint on the changed files, at verification (verify/lint_start.py).
    baseline_timeout_seconds: PositiveFloat = 60.0
    # `ruff check` in a workspace without its own ruff configuration: errors, not style.
    default_ruff_select: list[str] = Field(default_factory=lambda: ["E9", "F63", "F7", "F82"])


class ReflexionConfig(Section):
    """Reflexion as retry (plan_exec): after a failed verification whose re-injections are used
    up, one reflect call on the main model, then another round of work."""

    enabled: bool = True
    max_reflections: NonNegInt = 2


PHASES = ("planning", "building", "verification", "delivery")


class PhaseBudgets(Section):
    """Step quotas of a plan_exec run. Each round of work (the first, and each one after a failed
    verification) gets `think` steps in planning/building, then `verify` steps in
    verification/delivery; `reflect` counts reflect calls over the run. react.max_steps still
    bounds the total."""

    enabled: bool = True
    think: PositiveInt = 7
    verify: PositiveInt = 2
    reflect: NonNegInt = 1


class PlanExecConfig(Section):
    """Overrides of the phase policy (apps/engine/plan/phases.py); what is not named keeps its
    default. Phases: planning, building, verification, delivery."""

    start_phase: Literal["planning", "building", "verification", "delivery"] = "planning"
    whitelists: dict[str, list[str]] = Field(
        default_factory=dict, description="phase -> tools allowed there; '*' = every tool."
    )
    command_filters: dict[str, str | None] = Field(
        default_factory=dict,
        description="phase -> regex of shell commands refused there; null = no filter.",
    )
    auto_advance_after_steps: PositiveInt | None = Field(
        default=12, description="Move to the next phase after this many steps; null = never."
    )
    phase_budgets: PhaseBudgets = PhaseBudgets()


# The rules of the Emergency tier (apps/engine/failure/fallback.py): each maps a kind of failure to a
# stable error_code, a message, suggestions and whether a retry may help.
EmergencyRuleName = Literal[
    "timeout",
    "loop_detected",
    "runaway_output",
    "max_steps",
    "llm_rate_limited",
    "llm_auth",
    "llm_bad_request",
    "llm_outage",
    "verification_failed",
    "sandbox_unavailable",
    "internal_error",
]
EMERGENCY_RULES: tuple[str, ...] = get_args(EmergencyRuleName)


class RecoveryConfig(Section):
    """Recovery tier: after a failed react run, a reflection on the main model and another
    attempt in the same run, at most `max_retries` times."""

    enabled: bool = True
    max_retries: NonNegInt = 1


class EmergencyRuleConfig(Section):
    """Overrides of one Emergency rule; what is not given keeps the English default."""

    message: str | None = None
    suggestions: list[str] | None = None
    retryable: bool | None = None


class EmergencyConfig(Section):
    """Emergency tier: a failure that Recovery did not fix ends with a rule-based structured
    error (and the salvaged diff). Disabled: the run's original error stays."""

    enabled: bool = True
    rules: dict[
        EmergencyRuleName,
        EmergencyRuleConfig,
    ] = Field(default_factory=dict)


class FallbackChainConfig(Section):
    """main run → Recovery → Emergency, for react tasks started by the runner."""

    recovery: RecoveryConfig = RecoveryConfig()
    emergency: EmergencyConfig = EmergencyConfig()
