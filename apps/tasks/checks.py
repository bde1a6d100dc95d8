"""`manage.py check` (and every command that runs checks) validates agentkit.yaml."""

from django.conf import settings
from django.core.checks import Error, register

from apps.engine.config import ConfigError, load_config


@register("agentkit")
def check_agentkit_config(app_configs=None, **kwargs):
    try:
        load_config(settings.AGENTKIT_CONFIG)
    except ConfigError as exc:
        return [
            Error(
                f"{exc.source}: {line}",
                hint="Fix this field in agentkit.yaml (or point AGENTKIT_CONFIG at another file).",
                id="agentkit.E001",
            )
            for line in exc.lines
        ]
    return []
