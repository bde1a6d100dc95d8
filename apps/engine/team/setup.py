"""What a team_collab run checks and prepares before its phases run (orchestrator.py): the team
template and the phases' experts, @snapshot outside git, and the RunState the spec stage (planner
+ review gate, spec_stage.py) works on."""

from __future__ import annotations

from dataclasses import dataclass

from apps.engine.events import ErrorStruct
from apps.engine.failure import structs
from apps.engine.llm.types import Message
from apps.engine.loop.cancellation import CancellationToken, Interrupter
from apps.engine.loop.flow import Cancelled
from apps.engine.loop.state import RunState
from apps.engine.plan.spec import SNAPSHOT, SpecDraft
from apps.engine.task import AgentTask, TaskResult, UsageTotals
from apps.engine.team.members import setup_error


class TeamSetupError(Exception):
    """The spec cannot run with this team (unknown template or role, @snapshot without git)."""

    def __init__(self, error: ErrorStruct):
        super().__init__(error.message)
        self.error = error


def check_team(
    spec: SpecDraft | None,
    team: list[str] | None,
    *,
    template: str,
    templates: list[str],
    experts: list[str],
    can_run_commands: bool,
) -> None:
    """Raises TeamSetupError: an unknown template (listing the known ones), a phase given to an
    expert outside the template, phase commands without a sandbox to run them in."""
    if team is None:
        raise TeamSetupError(
            setup_error(
                "unknown_team_template",
                f"unknown team template {template!r}; known templates: "
                f"{', '.join(sorted(templates))}",
                "Choose one of the known templates (team.template in agentkit.yaml), or "
                "define it under team.templates.",
            )
        )
    for phase in spec.phases if spec else ():
        if phase.role not in team or phase.role not in experts:
            raise TeamSetupError(
                setup_error(
                    "unknown_expert",
                    f"phase {phase.id!r} is given to {phase.role!r}, which team template "
                    f"{template!r} does not have; its experts: {', '.join(sorted(team))}",
                    "Give the phase to one of these experts, or add the role under experts "
                    "and to the template in agentkit.yaml.",
                )
            )
        if (phase.validation_command or phase.rollback_command) and not can_run_commands:
            raise TeamSetupError(
                setup_error(
                    "rollback_unavailable",
                    f"phase {phase.id!r} declares validation/rollback commands, but this run "
                    "has no sandbox to run them in",
                    "Run the task through the server (it provides the sandbox).",
                )
            )


def snapshot_warnings(spec: SpecDraft) -> list[ErrorStruct]:
    """@snapshot outside a git work tree cannot restore anything: said before any phase runs
    (the phases still run; a rollback that is needed then fails, and saves no checkpoint)."""
    return [
        setup_error(
            "snapshot_unavailable",
            f"phase {phase.id!r} rolls back with @snapshot, which needs a git repository at "
            "the workspace root; this workspace is not one, so its rollback would fail",
            "Run `git init` in the workspace (and commit), or give the phase a rollback "
            "command of its own.",
        )
        for phase in spec.phases
        if phase.rollback_command == SNAPSHOT
    ]


@dataclass(frozen=True, slots=True)
class StageTask:
    """What the spec stage reads of the run's task: the planner plans for team_collab."""

    task_id: int | str
    goal: str
    pitfalls: str
    model: str | None
    mode: str = "team_collab"


class StageRun:
    """The RunState the spec stage works on (its events, interrupter, usage), for one stage."""

    def __init__(self, task: AgentTask, cancel: CancellationToken | None):
        self.state = RunState(StageTask(task.task_id, task.goal, task.pitfalls, task.model))
        self.state.messages = [Message("user", task.goal)]
        interrupter = self.state.interrupter = Interrupter()
        self._unsubscribe = (
            cancel.subscribe(
                lambda reason: interrupter.interrupt(
                    lambda: Cancelled(error=structs.cancelled(reason))
                )
            )
            if cancel is not None
            else (lambda: None)
        )

    def close(self) -> TaskResult:
        self._unsubscribe()
        return TaskResult(
            task_id=self.state.task.task_id,
            status="completed",
            steps=0,
            usage=UsageTotals.of(self.state.usage, self.state.llm_calls),
            cost=self.state.cost,
        )
