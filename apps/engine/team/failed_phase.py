"""A failed team_collab phase (seed 001 KTD8): its `validation_command`, if set → when that fails
(or is not set) and a `rollback_command` is set, the command runs in the sandbox, or `@snapshot`
restores the git snapshot taken before the phase (`phase_rollback_started` → `_completed` |
`_failed`) → the phase's checkpoint is saved unless its rollback failed (R21)."""

from __future__ import annotations

from dataclasses import dataclass

from apps.engine.plan.spec import SNAPSHOT, PhaseSpec
from apps.engine.ports import CheckpointStore, PhaseCheckpoint
from apps.engine.task import TaskResult
from apps.engine.team.members import phase_data
from apps.engine.team.rollback import CommandOutcome, GitSnapshots, RollbackExecutor


@dataclass
class FailedPhase:
    """What the orchestrator knows of one failed phase when it rolls it back."""

    phase: PhaseSpec
    result: TaskResult
    commands: RollbackExecutor | None  # None: the orchestrator refused such phases before
    snapshots: GitSnapshots
    checkpoints: CheckpointStore | None

    async def roll_back(self, snapshots: dict[str, str], event):
        """Yields the rollback's events; saves the checkpoint unless the rollback failed."""
        phase, result = self.phase, self.result
        rolled_back = False
        if phase.validation_command:
            check = await self.commands.run(phase.validation_command)
            if check.passed:  # the workspace is still sound: nothing to undo
                await save_checkpoint(
                    self.checkpoints, phase.id, "failed", result, snapshots.get(phase.id, "")
                )
                return
        if phase.rollback_command:
            data = {**phase_data(phase), "command": phase.rollback_command}
            if phase.validation_command:
                data["validation"] = check.event_data()
            yield event("phase_rollback_started", **data)
            if phase.rollback_command != SNAPSHOT:
                outcome = await self.commands.run(phase.rollback_command)
            elif phase.id in snapshots:
                outcome = await self.snapshots.restore(snapshots[phase.id])
            else:
                outcome = CommandOutcome(
                    SNAPSHOT,
                    False,
                    -1,
                    "no snapshot to restore: none was taken before this phase (@snapshot needs "
                    "a git repository at the workspace root; see the phase's error)",
                )
            if outcome.passed:
                yield event(
                    "phase_rollback_completed",
                    **phase_data(phase),
                    **outcome.event_data(),
                    snapshot_ref=snapshots.get(phase.id, ""),
                )
                rolled_back = True
            else:
                yield event(
                    "phase_rollback_failed",
                    **phase_data(phase),
                    **outcome.event_data(),
                    checkpoint_saved=False,
                )
                return  # R21: a failed rollback never persists a checkpoint
        status = "rolled_back" if rolled_back else "failed"
        await save_checkpoint(
            self.checkpoints, phase.id, status, result, snapshots.get(phase.id, "")
        )


async def save_checkpoint(
    checkpoints: CheckpointStore | None, phase_id: str, status: str, result: TaskResult, ref: str
) -> None:
    """A phase's checkpoint (its counters and snapshot ref), when checkpoints are kept."""
    if checkpoints is None:
        return
    counters = {
        "final": result.final,
        "steps": result.steps,
        "usage": result.usage.model_dump(mode="json"),
        "cost": result.cost,
        "phases": result.phases,
    }
    await checkpoints.save(PhaseCheckpoint(phase_id, status, counters, ref))
