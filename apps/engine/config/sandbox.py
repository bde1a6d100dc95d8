"""The `sandbox` section: what must hold, the limits, what a command may see."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from apps.engine.config.base import PositiveFloat, PositiveInt, Section

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
