"""TeamOrchestrator: team_collab runs a confirmed spec (plan/spec.py) with a team of experts.

Given no spec, run() first runs the spec stage (planner + review gate, plan/spec_stage.py, the same as
plan_exec's) after its `task_started`: the confirmed spec is then executed; a review that timed
out ends the task parked, nothing run.

Each spec phase is one phased ReAct run (`ReActEngine.run()`, mode plan_exec: the only agent loop)
by the expert its `role` names — the expert's system prompt, tools and model (config/team.py) —
in the shared workspace. Phases run in dependency order; those whose dependencies are done run at
the same time, at most `team.max_concurrency`. The orchestrator's own events frame the task:
exactly one `task_started` and one `task_finished`, and exactly one lifecycle hook fires, in
run()'s one `finally`. A phase's run is translated: its start and end become `phase_started` and
`phase_completed` / `phase_failed`; its other events pass through with `phase_id` added.

A failed phase: `phase_failed` → its dependents `phase_failed` (never run) → validation, rollback
and checkpoint (failed_phase.py). Phases that do not depend on it go on. A task with a failed
phase fails with an `error_struct` naming it: never a fallback to react.

Checkpoints (ports.CheckpointStore): every completed phase is saved; a run started with
checkpoints already stored (a task resumed after a restart) does not run the completed phases
again, and its totals include theirs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from apps.engine.config import AgentkitConfig
from apps.engine.config.team import ExpertConfig, team_experts, team_templates
from apps.engine.events import ErrorStruct, Event, EventType
from apps.engine.failure import structs
from apps.engine.loop.cancellation import CancellationToken
from apps.engine.loop.flow import Finished
from apps.engine.loop.react import ReActEngine
from apps.engine.plan.phases import PhasePolicy, PhaseState
from apps.engine.plan.spec import SNAPSHOT, PhaseSpec, SpecDraft
from apps.engine.ports import CheckpointStore, PhaseCheckpoint, TaskHooks, fire_hook
from apps.engine.task import AgentTask, TaskResult
from apps.engine.team.failed_phase import FailedPhase, save_checkpoint
from apps.engine.team.members import (
    crashed_result,
    dependency_failed,
    phase_data,
    phase_goal,
    phases_failed,
    result_data,
    result_of_checkpoint,
    summary_answer,
    totals,
    with_planning,
)
from apps.engine.team.rollback import GitSnapshots, RollbackExecutor, SnapshotError
from apps.engine.team.setup import StageRun, TeamSetupError, check_team, snapshot_warnings

log = logging.getLogger(__name__)

# (expert, verify, phase policy) -> the engine for one phase's run, without hooks (the
# orchestrator's fire); verify: the phase ends the spec (nothing depends on it).
EngineFactory = Callable[[ExpertConfig, bool, PhasePolicy], ReActEngine]


@dataclass(slots=True)
class _Done:
    phase_id: str
    result: TaskResult | None
    crash: BaseException | None = None
    snapshot: str = ""  # the @snapshot commit taken before the phase


class TeamOrchestrator:
    def __init__(
        self,
        engine_for: EngineFactory,
        config: AgentkitConfig | None = None,
        *,
        hooks: TaskHooks | None = None,
        commands: RollbackExecutor | None = None,
        checkpoints: CheckpointStore | None = None,
        template: str | None = None,
        stage: Any = None,
        baseline: Callable[[], Awaitable[None]] | None = None,
        snapshots: Callable[[str], Any] | None = None,
    ):
        self.engine_for = engine_for
        # `@snapshot` for a task id: GitSnapshots in the sandbox by default; a host may give its
        # own with the same methods (apps/tasks: a repository task's checkpoints are commits on
        # its branch).
        self.snapshot_factory = snapshots
        # The verifier's take_baseline (verify/baseline.py): before the first phase changes
        # anything, what the workspace already had wrong; the verifying phases judge against it.
        self.baseline = baseline
        self.config = config or AgentkitConfig()
        self.hooks = hooks or TaskHooks()
        self.commands = commands  # None: validation/rollback commands cannot run (refused)
        self.checkpoints = checkpoints
        self.template = template or self.config.team.template
        # Planner + review gate (spec_stage.SpecStage) when run() gets no spec: its events come
        # after task_started; it ends with the spec confirmed (`stage.confirmed`) or raises
        # Finished (parked, cancelled, failed).
        self.stage = stage
        self.experts = team_experts(self.config.experts)

    async def execute(
        self, task: AgentTask, spec: SpecDraft, *, cancel: CancellationToken | None = None
    ) -> TaskResult:
        last: Event | None = None
        async with aclosing(self.run(task, spec, cancel=cancel)) as events:
            async for event in events:
                last = event
        return TaskResult.from_event(last)

    # ── the run ────────────────────────────────────────────────────────────────────────────────
    async def run(
        self,
        task: AgentTask,
        spec: SpecDraft | None = None,
        *,
        cancel: CancellationToken | None = None,
    ) -> AsyncIterator[Event]:
        """Runs `spec`; without one, the stage (planner + review gate) gives it first."""
        seq = 0

        def event(kind: EventType, **data: Any) -> Event:
            nonlocal seq
            seq += 1
            return Event(type=kind, task_id=task.task_id, seq=seq, ts=datetime.now(UTC), data=data)

        result: TaskResult | None = None
        planning: TaskResult | None = None  # the stage's model usage
        running: dict[str, asyncio.Task] = {}
        try:
            team = self._team_or_none()
            yield event(
                "task_started",
                mode="team_collab",
                model=task.model or self.config.llm.main,
                goal=task.goal,
                template=self.template,
                experts=sorted(team or ()),
                phases=[p.id for p in spec.phases] if spec else [],
                max_concurrency=self.config.team.max_concurrency,
            )
            try:
                if team is None:
                    self._check(None, team)  # raises: unknown template, before any planning
                if spec is None:
                    stage = StageRun(task, cancel)
                    try:
                        async for item in self.stage(stage.state, cancel):
                            yield event(item.type, **item.data)
                    finally:
                        planning = stage.close()
                    spec = self.stage.confirmed.draft
                self._check(spec, team)
                saved = await self._load_checkpoints()
                await self._take_baseline(task)
                for warning in self._snapshot_warnings(spec):
                    yield event("error", step=0, fatal=False, error_struct=warning.model_dump())
            except TeamSetupError as bad:
                result = TaskResult(task_id=task.task_id, status="failed", error=bad.error)
            except Finished as end:  # the stage ended the run: parked, cancelled, failed
                result = TaskResult(
                    task_id=task.task_id, status=end.status, final=end.final, error=end.error
                )
            if result is None:
                async for item in self._schedule(task, spec, saved, running, event, cancel):
                    if isinstance(item, TaskResult):
                        result = item
                    else:
                        yield item
            result = with_planning(result, planning)
            if result.status not in ("completed", "parked") and result.error is not None:
                yield event(
                    "error", step=result.steps, fatal=True, error_struct=result.error.model_dump()
                )
            yield event("task_finished", **result.event_data(self.config.limits.answer_chars))
        except (GeneratorExit, asyncio.CancelledError):
            result = result or TaskResult(
                task_id=task.task_id, status="cancelled", error=structs.interrupted()
            )
            raise
        except Exception as exc:  # a bug of the orchestrator or a port: the run still ends
            log.exception("team_collab orchestration failed for task %s", task.task_id)
            result = TaskResult(
                task_id=task.task_id, status="failed", error=structs.engine_bug(exc)
            )
            yield event("error", step=0, fatal=True, error_struct=result.error.model_dump())
            yield event("task_finished", **result.event_data(self.config.limits.answer_chars))
            raise
        finally:
            for job in running.values():
                job.cancel()
            for job in running.values():
                with suppress(BaseException):
                    await job
            await fire_hook(
                self.hooks,
                result
                or TaskResult(
                    task_id=task.task_id, status="cancelled", error=structs.interrupted()
                ),
            )

    async def _take_baseline(self, task: AgentTask) -> None:
        if self.baseline is None:
            return
        try:
            await self.baseline()
        except Exception:  # only makes verification stricter; never stops the run
            log.warning("task %s: no verification baseline", task.task_id, exc_info=True)

    def _team_or_none(self) -> list[str] | None:
        template = team_templates(self.config.team, self.config.experts).get(self.template)
        return None if template is None else list(template.experts)

    def _check(self, spec: SpecDraft | None, team: list[str] | None) -> None:
        check_team(
            spec,
            team,
            template=self.template,
            templates=list(team_templates(self.config.team, self.config.experts)),
            experts=list(self.experts),
            can_run_commands=self.commands is not None,
        )

    def _snapshot_warnings(self, spec: SpecDraft) -> list[ErrorStruct]:
        if self.commands is None or self._snapshots(None).available():
            return []
        return snapshot_warnings(spec)

    def _snapshots(self, task: AgentTask | None) -> GitSnapshots:
        task_id = task.task_id if task else "check"
        if self.snapshot_factory is not None:
            return self.snapshot_factory(str(task_id))
        return GitSnapshots(self.commands, task_id)

    async def _load_checkpoints(self) -> dict[str, PhaseCheckpoint]:
        if self.checkpoints is None:
            return {}
        return {c.phase_id: c for c in await self.checkpoints.load()}

    # ── scheduling ─────────────────────────────────────────────────────────────────────────────
    async def _schedule(self, task, spec: SpecDraft, saved, running, event, cancel):
        """Yields the run's events, then its TaskResult."""
        status = {p.id: "pending" for p in spec.phases}
        results: dict[str, TaskResult] = {}
        finals: dict[str, str] = {}
        snapshots: dict[str, str] = {}
        for phase in spec.phases:  # resumed: completed phases are not run again
            done = saved.get(phase.id)
            if done is not None and done.status == "completed":
                status[phase.id] = "completed"
                finals[phase.id] = str(done.counters.get("final", ""))
                results[phase.id] = result_of_checkpoint(task, done)
                yield event(
                    "phase_completed",
                    **phase_data(phase),
                    resumed=True,
                    status="completed",
                    steps=results[phase.id].steps,
                )
        queue: asyncio.Queue = asyncio.Queue()
        sinks = {p.id for p in spec.phases if not spec.dependents_of(p.id)}
        limit = self.config.team.max_concurrency
        cancelled = False
        while True:
            for phase in spec.phases:
                ready = status[phase.id] == "pending" and all(
                    status[d] == "completed" for d in phase.depends_on
                )
                if ready and len(running) < limit and not cancelled:
                    status[phase.id] = "running"
                    goal = phase_goal(spec, phase, finals)
                    running[phase.id] = asyncio.create_task(
                        self._run_phase(task, phase, goal, phase.id in sinks, queue, cancel)
                    )
            if not running:
                break
            item = await queue.get()
            if not isinstance(item, _Done):
                yield item(event)
                continue
            running.pop(item.phase_id, None)
            if item.snapshot:
                snapshots[item.phase_id] = item.snapshot
            phase = spec.phase(item.phase_id)
            result = item.result or crashed_result(task, item.crash)
            results[phase.id] = result
            if result.status == "completed":
                status[phase.id] = "completed"
                finals[phase.id] = result.final
                yield event("phase_completed", **phase_data(phase), **result_data(result))
                await save_checkpoint(
                    self.checkpoints, phase.id, "completed", result, snapshots.get(phase.id, "")
                )
                continue
            if result.status == "cancelled":
                cancelled = True
            status[phase.id] = "failed"
            yield event("phase_failed", **phase_data(phase), **result_data(result))
            for dependent in spec.dependents_of(phase.id):
                if status[dependent] == "pending":
                    status[dependent] = "failed"
                    yield event(
                        "phase_failed",
                        **phase_data(spec.phase(dependent)),
                        status="skipped",
                        failed_dependency=phase.id,
                        error_struct=dependency_failed(dependent, phase.id).model_dump(),
                    )
            if not cancelled:
                failed = FailedPhase(
                    phase, result, self.commands, self._snapshots(None), self.checkpoints
                )
                async for rollback_event in failed.roll_back(snapshots, event):
                    yield rollback_event
        if cancelled or (cancel is not None and cancel.cancelled):
            yield TaskResult(
                task_id=task.task_id,
                status="cancelled",
                error=structs.cancelled("cancelled by the user"),
                **totals(results),
            )
            return
        failed = [p for p in spec.phases if status[p.id] != "completed"]
        if failed:
            yield TaskResult(
                task_id=task.task_id,
                status="failed",
                final=summary_answer(spec, finals),
                error=phases_failed(spec, status, results),
                **totals(results),
            )
        else:
            yield TaskResult(
                task_id=task.task_id,
                status="completed",
                final=summary_answer(spec, finals),
                **totals(results),
            )

    async def _run_phase(self, task, phase: PhaseSpec, goal, verify, queue, cancel) -> None:
        """One phase's ReAct run; its events go to `queue` (as makers), then a _Done."""
        expert = self.experts[phase.role]
        result: TaskResult | None = None
        snapshot = ""
        try:
            if phase.rollback_command == SNAPSHOT and self._snapshots(task).available():
                snapshot = await self._snapshots(task).take(phase.id)
            policy = replace(
                PhasePolicy.from_config(self.config.plan_exec),
                start_phase=PhaseState(expert.start_phase),
            )
            engine = self.engine_for(expert, verify, policy)
            sub = replace(
                task,
                goal=goal,
                mode="plan_exec",
                system_prompt=expert.system_prompt,
                tools=None if expert.tools is None else tuple(sorted(expert.tools)),
                model=expert.model or task.model,
            )
            async with aclosing(engine.run(sub, cancel=cancel)) as events:
                async for item in events:
                    if item.type == "task_started":
                        data = {
                            **phase_data(phase),
                            "model": item.data.get("model"),
                            "tools": item.data.get("tools", []),
                        }
                        queue.put_nowait(_maker("phase_started", data))
                    elif item.type == "task_finished":
                        result = TaskResult.from_event(item)
                    elif item.type == "error" and item.data.get("fatal"):
                        continue  # the phase's failure is in phase_failed
                    else:
                        queue.put_nowait(_maker(item.type, {**item.data, "phase_id": phase.id}))
        except SnapshotError as exc:
            queue.put_nowait(_Done(phase.id, None, exc))
            return
        except Exception as exc:
            log.exception("phase %s of task %s crashed", phase.id, task.task_id)
            queue.put_nowait(_Done(phase.id, None, exc, snapshot))
            return
        queue.put_nowait(_Done(phase.id, result, snapshot=snapshot))


def _maker(kind: str, data: dict[str, Any]) -> Callable[[Callable[..., Event]], Event]:
    """A forwarded event, numbered when the orchestrator yields it (in the order it yields)."""
    return lambda event: event(kind, **data)
