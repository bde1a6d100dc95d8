"""The Django side's access to agentkit.yaml: loaded once per process from settings.AGENTKIT_CONFIG."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from apps.engine.config import AgentkitConfig, load_config


@lru_cache(maxsize=1)
def agent_config() -> AgentkitConfig:
    """Raises apps.engine.config.ConfigError (a readable, line-per-field message) when invalid."""
    return load_config(settings.AGENTKIT_CONFIG)


def reload_agent_config() -> AgentkitConfig:
    agent_config.cache_clear()
    return agent_config()
