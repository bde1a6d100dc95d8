"""The whole file: `AgentkitConfig` (every section, and the cross-references a field validator
cannot see), `parse_config` and `load_config`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from apps.engine.config.agent import (
    CompressionConfig,
    LimitsConfig,
    ModesConfig,
    PromptCacheConfig,
    ReactConfig,
    RepoMapConfig,
    SkillConfig,
    StreamingConfig,
)
from apps.engine.config.base import KNOWN_TOOLS, ConfigError, Section
from apps.engine.config.mcp import McpServerConfig, is_mcp_tool_ref, mcp_server_errors
from apps.engine.config.models import LLMConfig, ModelConfig
from apps.engine.config.quality import (
    PHASES,
    FallbackChainConfig,
    PlanExecConfig,
    ReflexionConfig,
    VerificationConfig,
)
from apps.engine.config.sandbox import SandboxConfig
from apps.engine.config.server import (
    EventsConfig,
    EvolutionConfig,
    ExecutorConfig,
    MetricsConfig,
    PitfallsConfig,
    TracingConfig,
    WorkspacesConfig,
)
from apps.engine.config.specs import PlannerConfig, SpecReviewConfig
from apps.engine.config.team import ExpertConfig, RollbackConfig, TeamConfig, team_errors


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
    metrics: MetricsConfig = MetricsConfig()  # config/server.py
    tracing: TracingConfig = TracingConfig()
    events: EventsConfig = EventsConfig()
    spec_review: SpecReviewConfig = SpecReviewConfig()  # config/specs.py
    planner: PlannerConfig = PlannerConfig()
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)  # config/mcp.py

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
                if tool not in KNOWN_TOOLS and not is_mcp_tool_ref(tool, self.mcp_servers):
                    problems.append(
                        f"{path}.{index}: unknown tool {tool!r} (known: {', '.join(KNOWN_TOOLS)}, "
                        "or `<server>__<tool>` / `<server>__*` of a server in mcp_servers)"
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
        problems += mcp_server_errors(self.mcp_servers)
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
                if (
                    tool != "*"
                    and tool not in KNOWN_TOOLS
                    and not is_mcp_tool_ref(tool, self.mcp_servers)
                ):
                    problems.append(
                        f"plan_exec.whitelists.{phase}.{index}: unknown tool {tool!r} "
                        f"(known: {', '.join(KNOWN_TOOLS)}, '*', or `<server>__<tool>` / "
                        "`<server>__*` of a server in mcp_servers)"
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
