"""agentkit.yaml as pydantic models.

`load_config(path)` reads the file once and returns an `AgentkitConfig`; an invalid file raises
`ConfigError` whose message has one line per bad field, naming its YAML path and what is expected.
Every option has a default that works offline: with an empty file, the `main` model alias is the
deterministic `scripted` provider.

Framework-free: imported by the engine and by the Django side alike.

One module per group of sections: `base` (ConfigError, the shared base model, known names),
`models` (models, llm), `agent` (skills, modes, react, prompt_cache, repo_map, compression,
streaming, limits), `quality` (verification, reflexion, plan_exec, fallback_chain), `sandbox`,
`server` (evolution, pitfalls, executor, workspaces), `specs` (spec_review, planner), `team`
(experts, team, rollback), and `loading` (AgentkitConfig, parse_config, load_config). Everything
public is importable from this package: `from apps.engine.config import load_config, ...`.
"""

from __future__ import annotations

from apps.engine.config.agent import (
    CompressionConfig,
    LimitsConfig,
    LoopDetectionConfig,
    ModesConfig,
    ModeVerification,
    PromptCacheConfig,
    ReactConfig,
    RepoMapConfig,
    SkillConfig,
    StreamingConfig,
)
from apps.engine.config.base import (
    KNOWN_TOOLS,
    MODES,
    PROVIDERS,
    ConfigError,
    NonNegFloat,
    NonNegInt,
    PositiveFloat,
    PositiveInt,
    Section,
)
from apps.engine.config.loading import (
    AgentkitConfig,
    load_config,
    parse_config,
)
from apps.engine.config.mcp import McpCheckConfig, McpServerConfig
from apps.engine.config.models import (
    LLMConfig,
    ModelConfig,
    ModelPrice,
    RetryConfig,
    TimeoutConfig,
)
from apps.engine.config.quality import (
    EMERGENCY_RULES,
    PHASES,
    EmergencyConfig,
    EmergencyRuleConfig,
    EmergencyRuleName,
    FallbackChainConfig,
    PhaseBudgets,
    PlanExecConfig,
    RecoveryConfig,
    ReflexionConfig,
    VerificationConfig,
)
from apps.engine.config.sandbox import (
    SandboxConfig,
    SandboxLimitsConfig,
    SandboxProperty,
)
from apps.engine.config.server import (
    EvolutionConfig,
    ExecutorConfig,
    PitfallsConfig,
    WorkspacesConfig,
)
from apps.engine.config.specs import (
    PlannerConfig,
    SpecReviewConfig,
)
from apps.engine.config.team import (
    DEFAULT_EXPERTS,
    DEFAULT_TEMPLATE,
    ExpertConfig,
    RollbackConfig,
    TeamConfig,
    TeamTemplate,
    team_errors,
    team_experts,
    team_templates,
)

__all__ = [
    "DEFAULT_EXPERTS",
    "DEFAULT_TEMPLATE",
    "EMERGENCY_RULES",
    "KNOWN_TOOLS",
    "MODES",
    "PHASES",
    "PROVIDERS",
    "AgentkitConfig",
    "CompressionConfig",
    "ConfigError",
    "EmergencyConfig",
    "EmergencyRuleConfig",
    "EmergencyRuleName",
    "EvolutionConfig",
    "ExecutorConfig",
    "ExpertConfig",
    "FallbackChainConfig",
    "LLMConfig",
    "LimitsConfig",
    "LoopDetectionConfig",
    "McpCheckConfig",
    "McpServerConfig",
    "ModeVerification",
    "ModelConfig",
    "ModelPrice",
    "ModesConfig",
    "NonNegFloat",
    "NonNegInt",
    "PhaseBudgets",
    "PitfallsConfig",
    "PlanExecConfig",
    "PlannerConfig",
    "PositiveFloat",
    "PositiveInt",
    "PromptCacheConfig",
    "ReactConfig",
    "RecoveryConfig",
    "ReflexionConfig",
    "RepoMapConfig",
    "RetryConfig",
    "RollbackConfig",
    "SandboxConfig",
    "SandboxLimitsConfig",
    "SandboxProperty",
    "Section",
    "SkillConfig",
    "SpecReviewConfig",
    "StreamingConfig",
    "TeamConfig",
    "TeamTemplate",
    "TimeoutConfig",
    "VerificationConfig",
    "WorkspacesConfig",
    "load_config",
    "parse_config",
    "team_errors",
    "team_experts",
    "team_templates",
]
