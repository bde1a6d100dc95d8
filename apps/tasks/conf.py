"""The Django side's access to agentkit.yaml: loaded once per process from settings.AGENTKIT_CONFIG,
with the deployment's overrides from the environment applied (settings.AGENTKIT_EXECUTOR)."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from apps.engine.config import AgentkitConfig, ConfigError, load_config

EXECUTOR_KINDS = ("inline", "rq")


def load_agent_config() -> AgentkitConfig:
    """agentkit.yaml plus the environment's overrides; raises ConfigError (one line per bad
    field) when either is invalid."""
    config = load_config(settings.AGENTKIT_CONFIG)
    kind = settings.AGENTKIT_EXECUTOR
    if not kind:
        return config
    if kind not in EXECUTOR_KINDS:
        raise ConfigError(
            "AGENTKIT_EXECUTOR (environment)",
            [f"{kind!r} is not an executor: use one of {', '.join(EXECUTOR_KINDS)}, or unset it"],
        )
    return config.model_copy(update={"executor": config.executor.model_copy(update={"kind": kind})})


@lru_cache(maxsize=1)
def agent_config() -> AgentkitConfig:
    """Raises apps.engine.config.ConfigError (a readable, line-per-field message) when invalid."""
    return load_agent_config()


def reload_agent_config() -> AgentkitConfig:
    agent_config.cache_clear()
    return agent_config()
