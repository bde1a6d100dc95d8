"""`manage.py check` (and every command that runs checks) validates agentkit.yaml, and with
`sandbox.mode: required` that a sandbox backend works on this machine."""

from django.core.checks import Error, register

from apps.engine.config import ConfigError
from apps.tasks.conf import load_agent_config


@register("agentkit")
def check_agentkit_config(app_configs=None, **kwargs):
    try:
        config = load_agent_config()
    except ConfigError as exc:
        return [
            Error(
                f"{exc.source}: {line}",
                hint="Fix this field in agentkit.yaml (or point AGENTKIT_CONFIG at another file), "
                "or the environment variable it names.",
                id="agentkit.E001",
            )
            for line in exc.lines
        ]
    if config.sandbox.mode == "required":
        from apps.engine.sandbox import Sandbox

        sandbox = Sandbox.from_config(config.sandbox)
        if not sandbox.available:
            return [
                Error(
                    f"sandbox.mode is 'required' but {sandbox.unavailable_reason}",
                    hint="Install bubblewrap, allow another backend in sandbox.backends, "
                    "require less in sandbox.require (`manage.py check_sandbox` says what each "
                    "backend holds), or set sandbox.mode: auto.",
                    id="agentkit.E002",
                )
            ]
    return []
