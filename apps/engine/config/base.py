"""What every section of agentkit.yaml shares: the error, the base model, the known names."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

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
