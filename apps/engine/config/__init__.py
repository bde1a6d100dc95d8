"""agentkit.yaml as pydantic models.

`load_config(path)` reads the file once and returns an `AgentkitConfig`; an invalid file raises
`ConfigError` whose message has one line per bad field, naming its YAML path and what is expected.
Every option has a default that works offline: with an empty file, the `main` model alias is the
deterministic `scripted` provider.

Framework-free: imported by the engine and by the Django side alike.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from apps.engine.config.specs import PlannerConfig, SpecReviewConfig
from apps.engine.config.team import ExpertConfig, RollbackConfig, TeamConfig, team_errors

PROVIDERS = ("openai", "anthropic", "scripted")
MODES = ("direct_chat", "react", "plan_exec", "team_collab")
# Tool names the shipped tool set knows. Kept here (not imported from apps.tools) so the
# engine stays independent of tool implementations; unknown names in config are refused.
KNOWN_TOOLS = (
    "advance_phase",
    "read_file",
    "run_tests",
    "search",
    "shell",
    "str_replace_editor",
    "think",
)


class ConfigError(ValueError):
    """An agentkit.yaml that cannot be used. `lines` holds one 'path: problem' per bad field."""

    def __init__(self, source: str, lines: list[str]):
        self.source = source
        self.lines = lines
        body = "\n".join(f"  {line}" for line in lines)
        super().__init__(f"{source} is invalid:\n{body}")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PositiveInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]


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
    context_window: PositiveInt = 128_000
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


class VerificationConfig(Section):
    modes: ModeVerification = ModeVerification()
    max_reinjections: NonNegInt = 1
    timeout_seconds: PositiveFloat = 600.0
    python_commands: list[str] = Field(default_factory=lambda: ["pytest -x -q", "ruff check"])
    # What already failed when the task started does not fail it (apps/engine/plan/verify/baseline.py).
    baseline: bool = True
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


SandboxProperty = Literal[
    "no_network",
    "read_only_host",
    "hidden_host_files",
    "no_host_sockets",
    "unprivileged_user",
    "limits",
    "clean_environment",
    "tree_kill",
]


class SandboxLimitsConfig(Section):
    """Per command. `processes` counts the command and all its descendants; so does
    `memory_mb` where a memory cgroup can be made (else RLIMIT_AS falls back to it per process)."""

    processes: Annotated[int, Field(ge=8)] = 512
    address_space_mb: Annotated[int, Field(ge=64)] = 8192
    memory_mb: Annotated[int, Field(ge=64)] = 2048
    cpu_seconds: PositiveInt = 600
    file_size_mb: PositiveInt = 1024
    tmp_size_mb: PositiveInt = 512


class SandboxConfig(Section):
    """`auto`: best available backend that holds `require`, refuse to run when none does;
    `required`: the same, and start-up checks fail without one; `off`: run unconfined (must be
    chosen explicitly)."""

    mode: Literal["auto", "required", "off"] = "auto"

    @field_validator("mode", mode="before")
    @classmethod
    def _bare_off(cls, value: Any) -> Any:
        # YAML reads a bare `off` as the boolean false; that is what the user meant.
        return "off" if value is False else value

    network: bool = False
    timeout_seconds: PositiveFloat = 120.0
    env_passthrough: list[str] = Field(default_factory=lambda: ["LANG", "LC_ALL", "TZ"])
    backends: list[Literal["bwrap", "unshare", "landlock"]] = Field(
        default_factory=lambda: ["bwrap", "unshare", "landlock"],
        description="Backends that may be used, in order of preference.",
    )
    require: list[SandboxProperty] = Field(
        default_factory=lambda: [
            "no_network",
            "read_only_host",
            "hidden_host_files",
            "no_host_sockets",
            "unprivileged_user",
            "limits",
            "clean_environment",
            "tree_kill",
        ],
        description="Properties the chosen backend must hold (manage.py check_sandbox).",
    )
    limits: SandboxLimitsConfig = SandboxLimitsConfig()
    installation_root: str | None = Field(
        default=None, description="The agentkit installation to hide; default: this checkout."
    )
    readable: list[str] = Field(default_factory=list, description="Extra read-only paths.")
    hidden: list[str] = Field(default_factory=list, description="Extra hidden system paths.")

    @field_validator("readable", "hidden")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        relative = [p for p in value if not os.path.isabs(p)]
        if relative:
            raise ValueError(f"paths must be absolute: {relative}")
        return value


class EvolutionConfig(Section):
    """What apps.evolution learns from finished tasks (ARCHITECTURE.md section 3)."""

    enabled: bool = True
    # Failures and gave_up_after_reflections are always reflected on; successes are sampled
    # at this rate by a stable hash of the task id (the same task always gets the same answer).
    success_sample_rate: Annotated[float, Field(ge=0, le=1)] = 0.1
    # On: pitfalls are recorded but the optimizer proposes no prompt versions.
    observe_only: bool = True
    # Active pitfalls (of one skill or mode) that must agree before a PromptVersion is proposed.
    min_examples: PositiveInt = 3
    # A pitfall becomes active (retrievable) at this confidence; below it stays a candidate.
    min_confidence: Annotated[float, Field(ge=0, le=1)] = 0.5
    # Jobs waiting on queue `evolution` beyond this are dropped (logged and counted).
    max_pending: PositiveInt = 1000
    # A/B: share of a skill's (or mode's) tasks that run its newest approved PromptVersion as a
    # candidate instead of the active one (stable hash of the task id). 0: never.
    ab_share: Annotated[float, Field(ge=0, le=1)] = 0.0
    # Who writes the lessons: `rules` (the rule-based reflector: failures only) or `llm` (the
    # auxiliary model reads the run and writes lessons from failures and sampled successes;
    # when it fails, the rule-based reflector writes them). Both pass the same gates.
    reflector: Literal["rules", "llm"] = "rules"


class PitfallsConfig(Section):
    """Retrieval of pitfalls into the volatile block of the prompt at planning."""

    top_k: NonNegInt = 3
    min_severity: Literal["low", "medium", "high"] = "high"
    # Retrieval slower than this is abandoned with a warning; the task goes on without pitfalls.
    timeout_ms: PositiveInt = 200


class ExecutorConfig(Section):
    kind: Literal["inline", "rq"] = "inline"
    queue: str = "agent"
    # A run's process touches its task every 2 s; a task `queued` or `running` untouched for
    # this long has no live run: the reaper ends or resumes it (apps/tasks/reaper.py).
    orphan_after_seconds: float = Field(default=20.0, ge=5.0, le=3600.0)


class WorkspacesConfig(Section):
    """Workspaces people create from the chat page (apps/tasks/workspaces.py)."""

    allowed_roots: list[str] = Field(default_factory=list)  # empty: "from a directory" is off
    upload_max_mb: PositiveInt = 50  # the archive as uploaded
    upload_max_unpacked_mb: PositiveInt = 500  # all its members together, once unpacked
    upload_max_files: PositiveInt = 20_000

    @field_validator("allowed_roots")
    @classmethod
    def _absolute(cls, roots: list[str]) -> list[str]:
        for root in roots:
            if not os.path.isabs(root):
                raise ValueError(f"{root!r} is not an absolute path, e.g. /srv/projects")
        return roots


def _default_models() -> dict[str, ModelConfig]:
    return {"main": ModelConfig(provider="scripted", model="scripted-demo")}


class AgentkitConfig(Section):
    models: dict[str, ModelConfig] = Field(default_factory=_default_models)
    llm: LLMConfig = LLMConfig()
    skills: dict[str, SkillConfig] = Field(default_factory=dict)
    experts: dict[str, ExpertConfig] = Field(default_factory=dict)  # config/team.py
    team: TeamConfig = TeamConfig()
    rollback: RollbackConfig = RollbackConfig()
    modes: ModesConfig = ModesConfig()
    react: ReactConfig = ReactConfig()
    prompt_cache: PromptCacheConfig = PromptCacheConfig()
    repo_map: RepoMapConfig = RepoMapConfig()
    compression: CompressionConfig = CompressionConfig()
    streaming: StreamingConfig = StreamingConfig()
    limits: LimitsConfig = LimitsConfig()
    verification: VerificationConfig = VerificationConfig()
    reflexion: ReflexionConfig = ReflexionConfig()
    plan_exec: PlanExecConfig = PlanExecConfig()
    fallback_chain: FallbackChainConfig = FallbackChainConfig()
    sandbox: SandboxConfig = SandboxConfig()
    evolution: EvolutionConfig = EvolutionConfig()
    pitfalls: PitfallsConfig = PitfallsConfig()
    executor: ExecutorConfig = ExecutorConfig()
    workspaces: WorkspacesConfig = WorkspacesConfig()
    spec_review: SpecReviewConfig = SpecReviewConfig()  # config/specs.py
    planner: PlannerConfig = PlannerConfig()

    # Where the file was read from; relative paths inside it (scripts) resolve against this.
    base_dir: Path = Field(default=Path("."), exclude=True)

    def reference_errors(self) -> list[str]:
        """Cross-references a field validator cannot see: aliases and tool names."""
        problems: list[str] = []
        known = sorted(self.models)

        def check_alias(path: str, alias: str | None) -> None:
            if alias is not None and alias not in self.models:
                problems.append(
                    f"{path}: unknown model alias {alias!r} (known: {', '.join(known)})"
                )

        def check_tools(path: str, tools: list[str] | None) -> None:
            for index, tool in enumerate(tools or []):
                if tool not in KNOWN_TOOLS:
                    problems.append(
                        f"{path}.{index}: unknown tool {tool!r} (known: {', '.join(KNOWN_TOOLS)})"
                    )

        check_alias("llm.main", self.llm.main)
        check_alias("llm.auxiliary_model", self.llm.auxiliary_model)
        for alias, chain in sorted(self.llm.fallbacks.items()):
            check_alias(f"llm.fallbacks.{alias}", alias)
            for index, fallback in enumerate(chain):
                check_alias(f"llm.fallbacks.{alias}.{index}", fallback)
        for name, skill in sorted(self.skills.items()):
            check_alias(f"skills.{name}.model", skill.model)
            check_tools(f"skills.{name}.tools", skill.tools)
        for name, expert in sorted(self.experts.items()):
            check_alias(f"experts.{name}.model", expert.model)
            check_tools(f"experts.{name}.tools", expert.tools)
        problems += team_errors(self.team, self.experts)
        problems += self._plan_exec_errors()
        for alias, model in sorted(self.models.items()):
            script_missing = model.script and not self.resolve_path(model.script).is_file()
            if model.provider == "scripted" and script_missing:
                problems.append(
                    f"models.{alias}.script: file {model.script!r} not found "
                    f"(relative paths resolve against {self.base_dir})"
                )
        return problems

    def _plan_exec_errors(self) -> list[str]:
        import re

        problems: list[str] = []
        section = self.plan_exec
        hint = f"phases: {', '.join(PHASES)} (explore/implement/verify were renamed)"
        for key, mapping in (
            ("whitelists", section.whitelists),
            ("command_filters", section.command_filters),
        ):
            for phase in sorted(set(mapping) - set(PHASES)):
                problems.append(f"plan_exec.{key}.{phase}: unknown phase ({hint})")
        for phase, tools in sorted(section.whitelists.items()):
            if not tools:
                problems.append(
                    f"plan_exec.whitelists.{phase}: empty whitelist: no tool could "
                    "run in this phase; name at least one tool, or '*' for all"
                )
            for index, tool in enumerate(tools):
                if tool != "*" and tool not in KNOWN_TOOLS:
                    problems.append(
                        f"plan_exec.whitelists.{phase}.{index}: unknown tool {tool!r} "
                        f"(known: {', '.join(KNOWN_TOOLS)}, or '*')"
                    )
        for phase, pattern in sorted(section.command_filters.items()):
            if pattern is None:
                continue
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(
                    f"plan_exec.command_filters.{phase}: invalid regular expression: {exc}"
                )
        return problems

    def resolve_path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.base_dir / path)

    def verification_enabled(self, mode: str) -> bool:
        return bool(getattr(self.verification.modes, mode))

    def model_for(self, alias: str | None = None) -> ModelConfig:
        return self.models[alias or self.llm.main]


def _describe(error: dict[str, Any]) -> str:
    loc = ".".join(str(part) for part in error["loc"] if part not in {"function-after"})
    kind = error["type"]
    message = error["msg"]
    if kind == "extra_forbidden":
        message = "unknown option (check the spelling; see agentkit.yaml comments for the list)"
    elif kind == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        message = f"got {error.get('input')!r}, expected one of {expected}"
    elif kind.endswith("_type") or kind.endswith("_parsing"):
        message = f"{message}, got {type(error.get('input')).__name__} {error.get('input')!r}"
    elif message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    return f"{loc or '(top level)'}: {message}"


def parse_config(data: Any, *, source: str = "agentkit.yaml", base_dir: Path | None = None):
    """Validate already-parsed YAML data. Raises ConfigError listing every problem."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, [f"(top level): expected a mapping, got {type(data).__name__}"])
    try:
        config = AgentkitConfig.model_validate({**data, "base_dir": base_dir or Path(".")})
    except ValidationError as exc:
        raise ConfigError(source, [_describe(err) for err in exc.errors()]) from None
    problems = config.reference_errors()
    if problems:
        raise ConfigError(source, problems)
    return config


def load_config(path: str | os.PathLike[str]) -> AgentkitConfig:
    """Read and validate agentkit.yaml. Raises ConfigError with a readable, line-per-field message."""
    file = Path(path)
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            source, ["(file): not found; set AGENTKIT_CONFIG or copy the shipped agentkit.yaml"]
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [f"(syntax): {problem} at {where}"]) from None
    return parse_config(data, source=source, base_dir=file.resolve().parent)
