"""Building the engine for a task (runner.py runs it): the engine's task (goal, history,
pitfalls, approved prompt version, repository map), the tools rooted in the workspace, the
verifier, and the engine itself — ReActEngine for direct_chat, react and plan_exec (behind the
spec stage), TeamOrchestrator for team_collab. A task that cannot start raises RunAborted."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from apps.engine.config import AgentkitConfig
from apps.engine.context.prompt import read_notes
from apps.engine.llm.gateway import Gateway
from apps.engine.loop.react import ReActEngine
from apps.engine.loop.resume import ResumePoint, ResumingPrelude
from apps.engine.plan.gate import active_command_filter
from apps.engine.plan.verify.run import Verifier, answer_verifier
from apps.engine.sandbox import Sandbox
from apps.engine.task import AgentTask
from apps.engine.team.orchestrator import TeamOrchestrator
from apps.engine.team.rollback import RollbackExecutor
from apps.engine.tools import ToolSet
from apps.evolution.services import planning_context
from apps.evolution.services.retrieval import SECTION as PITFALLS_SECTION
from apps.specs import checkpoints as spec_checkpoints
from apps.specs.stage import spec_stage_for
from apps.tasks.events.history import conversation_history
from apps.tasks.events.recorder import EventRecorder
from apps.tasks.failure import internal_paths, salvager_for, secrets_of
from apps.tasks.models import Task
from apps.tasks.routing import RUNNABLE_MODES
from apps.tasks.run.lifecycle import RunnerHooks
from apps.tasks.vcs.branch_snapshots import BranchSnapshots
from apps.tasks.vcs.worktrees import task_root
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools
from apps.tools.builtin.repo_map import build_repo_map
from apps.tools.mcp.hand_over import mcp_tools, with_mcp_servers

log = logging.getLogger(__name__)

ENGINE_MODES = RUNNABLE_MODES  # one list: what the chat page offers is what runs


class RunAborted(Exception):
    """The task cannot start (bad workspace, unavailable mode); carries the error for the user."""

    def __init__(self, error_code: str, message: str, suggestions: list[str] | None = None):
        super().__init__(message)
        self.error_struct = {
            "error_code": error_code,
            "message": message,
            "suggestions": suggestions or [],
            "retryable": False,
        }


def build_agent_task(task: Task, config: AgentkitConfig) -> AgentTask:
    if task.mode not in ENGINE_MODES:
        raise RunAborted(
            "mode_not_available",
            f"mode {task.mode!r} is not available; this version runs {', '.join(ENGINE_MODES)}",
            [
                "Send the message again with @plan (phases, verification, reflection), @react "
                "(tools) or @chat (a single answer)."
            ],
        )
    skill = config.skills.get(task.skill) if task.skill else None
    return AgentTask(
        task_id=task.pk,
        goal=task.goal,
        mode="plan_exec" if task.mode == "team_collab" else task.mode,  # team: phased runs
        system_prompt=skill.system_prompt if skill else "",
        tools=tuple(sorted(skill.tools)) if skill and skill.tools is not None else None,
        model=task.model or (skill.model if skill else None),
        # Conversation history and the volatile block of the system prompt (issue 13).
        history=conversation_history(task),
        notes=read_notes(Path(task.workspace.root_dir)),
        facts={"workspace": task.workspace.name},
    )


def prepare_agent_task(
    task: Task, config: AgentkitConfig, repo_maps: dict | None = None
) -> AgentTask:
    """Blocking, in ONE worker thread: the engine's task with its history, pitfalls, approved
    prompt version and repository map. One trip to a thread instead of three: with 50 tasks
    starting at once, each trip queues behind every other task's (bench/chat_load.py)."""
    agent_task = build_agent_task(task, config)  # reads history
    # Pitfalls + approved prompt version ({} when none or the store failed, logged).
    context = planning_context(task=task, config=config)
    repo_map = repository_map(task, config, agent_task.mode, repo_maps)
    agent_task = replace(agent_task, repo_map=repo_map)
    agent_task = with_mcp_servers(agent_task, config)  # starts them; names those down (facts)
    if context:
        agent_task = replace(
            agent_task, pitfalls=context.pop(PITFALLS_SECTION, ""), context=context
        )
    return agent_task


def repository_map(
    task: Task, config: AgentkitConfig, mode: str, repo_maps: dict | None = None
) -> str:
    """The workspace's repository map for the system prompt (blocking: a worker thread calls
    it); "" for direct_chat, with `repo_map.enabled: false`, or when it cannot be built.
    `repo_maps`: the maps built for the tasks prepared together with this one, by workspace
    directory (tasks created in one batch, apps/tasks/doors/intake.py, share their workspace's map)."""
    if mode == "direct_chat" or not config.repo_map.enabled:
        return ""
    root = task.workspace.root_dir
    if repo_maps is not None and root in repo_maps:
        return repo_maps[root]
    repo_map = _build_repository_map(task, config)
    if repo_maps is not None:
        repo_maps[root] = repo_map
    return repo_map


def _build_repository_map(task: Task, config: AgentkitConfig) -> str:
    model = config.models.get(task.model or config.llm.main)
    window = model.context_window if model is not None else 128_000
    try:
        return build_repo_map(
            Path(task.workspace.root_dir),
            # a small model's window is not spent on the map: at most 1/16 of it
            max_tokens=max(64, min(config.repo_map.max_tokens, window // 16)),
            time_limit_seconds=config.repo_map.time_limit_seconds,
        )
    except Exception:  # the map helps; it never stops a task
        log.exception("task %s: the repository map could not be built", task.pk)
        return ""


def build_tool_context(task: Task, config: AgentkitConfig) -> ToolContext:
    root = task_root(task)  # a repository task's worktree (worktrees.py), else the workspace
    if not root.is_dir():
        raise RunAborted(
            "workspace_missing",
            f"the workspace directory {root} does not exist",
            ["Create it, or fix the workspace's root directory in admin."],
        )
    sandbox = Sandbox.shared(config.sandbox)  # made once per loaded configuration
    return ToolContext(
        root=root,
        sandbox=sandbox,
        network=config.sandbox.network,
        timeout_seconds=config.sandbox.timeout_seconds,
        command_filter=active_command_filter,  # plan_exec: the current phase's shell filter
        verification_commands=tuple(task.workspace.verification_commands or ()),
        verifier=Verifier(sandbox, config.verification),
    )


def build_engine(
    task: Task,
    config: AgentkitConfig,
    gateway: Gateway,
    point: ResumePoint | None = None,
    checkpoints: spec_checkpoints.DatabaseCheckpoints | None = None,
    recorder: EventRecorder | None = None,
) -> ReActEngine:
    """The engine for one task. The verifier is always given; the engine runs it only when the
    mode has verification on (verification.modes). plan_exec: the spec stage, then the `spec`
    checkpoint, or — `point` given — the interrupted run's state (apps/engine/loop/resume.py);
    react with `point`: the interrupted run's state, then its next step."""
    ctx = build_tool_context(task, config)
    tools = ToolSet(
        [*build_tools(ctx, available_tool_names()), *mcp_tools(config)],
        max_output_chars=config.react.tool_output_max_chars,
    )
    skill = config.skills.get(task.skill) if task.skill else None
    spec_commands = [*ctx.verification_commands, *(skill.verification_commands if skill else ())]
    spec_commands = list(dict.fromkeys(spec_commands))  # a confirmed spec adds its commands
    verifier = answer_verifier(ctx.verifier, ctx.root, spec_commands)
    hooks = RunnerHooks(
        task.pk, internal_paths(ctx.root), secrets_of(config), mode=task.mode, recorder=recorder
    )
    stage = spec_stage_for(task, config, gateway, commands=spec_commands)
    if task.mode == "plan_exec":
        if checkpoints is None:
            checkpoints = spec_checkpoints.DatabaseCheckpoints(task_id=task.pk, spec_phases=False)
        stage = ResumingPrelude(stage, point, checkpoints)
    elif point is not None:  # react taken over from a dead run: its stored steps, then on
        stage = ResumingPrelude(stage, point)
    return ReActEngine(
        gateway,
        tools,
        config,
        verifier=verifier,
        hooks=hooks,
        fallback=config.fallback_chain,  # main → Recovery → Emergency (fallback.py)
        salvager=salvager_for(ctx.root),
        prelude=stage,  # plan_exec: planner + review gate first (apps/specs/stage.py)
    )


def build_team(
    task: Task, config: AgentkitConfig, gateway: Gateway, recorder: EventRecorder | None = None
) -> TeamOrchestrator:
    """team_collab: the spec stage (planner + review gate, as plan_exec's) and the orchestrator,
    whose experts each get an engine like build_engine's (tools rooted in the workspace; the
    verifier, with the confirmed spec's commands, only for the phases that end the spec)."""
    ctx = build_tool_context(task, config)
    skill = config.skills.get(task.skill) if task.skill else None
    spec_commands = [*ctx.verification_commands, *(skill.verification_commands if skill else ())]
    spec_commands = list(dict.fromkeys(spec_commands))  # a confirmed spec adds its commands
    verifier = answer_verifier(ctx.verifier, ctx.root, spec_commands)
    enabled = config.verification_enabled("team_collab")

    def engine_for(expert: Any, verify: bool, policy: Any) -> ReActEngine:
        tools = ToolSet(
            [*build_tools(ctx, available_tool_names()), *mcp_tools(config)],
            max_output_chars=config.react.tool_output_max_chars,
        )
        return ReActEngine(
            gateway,
            tools,
            config,
            verifier=verifier if verify and enabled else None,
            phase_policy=policy,
        )

    return TeamOrchestrator(
        engine_for,
        config,
        hooks=RunnerHooks(
            task.pk, internal_paths(ctx.root), secrets_of(config), mode=task.mode, recorder=recorder
        ),
        commands=RollbackExecutor(ctx.sandbox, ctx.root, config.rollback.timeout_seconds),
        checkpoints=spec_checkpoints.DatabaseCheckpoints(task_id=task.pk),
        stage=spec_stage_for(task, config, gateway, commands=spec_commands),
        baseline=verifier.take_baseline if enabled else None,
        # A repository task: its checkpoints are commits on its branch (worktrees.py).
        snapshots=(lambda _task_id: BranchSnapshots(task, config)) if task.worktree else None,
    )
