"""agentkit.yaml sections of team_collab: `experts` (roles), `team` (templates, concurrency) and
`rollback` (how a failed phase's rollback command runs). Framework-free, like the rest of this package.

The experts a team can use are the built-in ones (planner, coder, reviewer) overridden or
extended by `experts:`; a team template names the experts its spec phases may be given to.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_TEMPLATE = "default"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpertConfig(_Section):
    """One role of the team: its stable system prompt, the tools it may use (None = every tool),
    its model alias (None = llm.main), and the plan_exec phase its phased run starts in."""

    system_prompt: str = ""
    tools: list[str] | None = None
    model: str | None = None
    start_phase: Literal["planning", "building", "verification", "delivery"] = "planning"


DEFAULT_EXPERTS: dict[str, ExpertConfig] = {
    "planner": ExpertConfig(
        system_prompt=(
            "You are the planner of a small engineering team. Read only what you need (read_file "
            "with a symbol, search), then write a short, concrete plan for the phases that follow: "
            "which files and functions change, how, and how to check the result. You do not edit."
        ),
        tools=["read_file", "search", "think"],
    ),
    "coder": ExpertConfig(
        system_prompt=(
            "You are the coder of a small engineering team. Do exactly the phase you are given: "
            "read what you need, change code with str_replace_editor using anchors that match "
            "exactly once, run the tests, and say what you changed and why."
        ),
        tools=["read_file", "run_tests", "search", "shell", "str_replace_editor", "think"],
        start_phase="building",  # the plan is the planner's: straight to the work
    ),
    "reviewer": ExpertConfig(
        system_prompt=(
            "You are the reviewer of a small engineering team. Read the changes the earlier phases "
            "made (git diff, read_file), run the tests, and report what is right, what is wrong and "
            "what is missing. You do not edit."
        ),
        tools=["read_file", "run_tests", "search", "shell", "think"],
        start_phase="verification",
    ),
}


class TeamTemplate(_Section):
    experts: list[str] = Field(min_length=1)  # the roles spec phases may be given to


class TeamConfig(_Section):
    template: str = DEFAULT_TEMPLATE  # the template team_collab tasks use
    # Phases whose dependencies are done run at the same time, at most this many.
    max_concurrency: Annotated[int, Field(ge=1, le=16)] = 2
    templates: dict[str, TeamTemplate] = Field(default_factory=dict)


class RollbackConfig(_Section):
    # A phase's validation and rollback commands (and @snapshot's git commands) run in the
    # sandbox; past this they are killed and count as failed.
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 120.0


def team_experts(experts: dict[str, ExpertConfig]) -> dict[str, ExpertConfig]:
    """The built-in experts, overridden and extended by agentkit.yaml's `experts`."""
    return {**DEFAULT_EXPERTS, **experts}


def team_templates(team: TeamConfig, experts: dict[str, ExpertConfig]) -> dict[str, TeamTemplate]:
    """The named templates; `default` (every expert) unless agentkit.yaml defines its own."""
    default = TeamTemplate(experts=sorted(team_experts(experts)))
    return {DEFAULT_TEMPLATE: default, **team.templates}


def team_errors(team: TeamConfig, experts: dict[str, ExpertConfig]) -> list[str]:
    """Cross-references of the team section: templates naming unknown experts, an unknown
    `team.template` (each with the known names)."""
    templates = team_templates(team, experts)
    known = sorted(team_experts(experts))
    problems = [
        f"team.templates.{name}.experts.{index}: unknown expert {role!r} "
        f"(known: {', '.join(known)})"
        for name, template in sorted(team.templates.items())
        for index, role in enumerate(template.experts)
        if role not in known
    ]
    if team.template not in templates:
        problems.append(
            f"team.template: unknown template {team.template!r} "
            f"(known: {', '.join(sorted(templates))})"
        )
    return problems
