"""Setting up a ReActEngine run (loop/react.py): what a run holds before its first step, and the
interrupter of each attempt (the wall-time limit and the caller's cancel token)."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from apps.engine.config import AgentkitConfig, LoopDetectionConfig
from apps.engine.context.prompt import build_system_prompt, canonical_tools
from apps.engine.failure import structs
from apps.engine.llm.types import Message
from apps.engine.loop.cancellation import CancellationToken, Interrupter
from apps.engine.loop.detection import LoopDetector
from apps.engine.loop.flow import Cancelled, Finished, TimedOut
from apps.engine.loop.state import RunState
from apps.engine.loop.streaming import DeltaBatcher
from apps.engine.loop.textcalls import FINAL_ANSWER_SPEC
from apps.engine.plan import phases
from apps.engine.plan.phases import PhasePolicy, PhaseTracker
from apps.engine.ports import Verifier
from apps.engine.tools import ToolSet, expand_tool_names


class EngineParts(Protocol):
    """What setting up a run reads of its ReActEngine (loop/react.py), which passes itself."""

    config: AgentkitConfig
    tools: ToolSet
    verifier: Verifier | None
    phase_policy: PhasePolicy | None


log = logging.getLogger(__name__)


def prepare(engine: EngineParts, run: RunState, cancel: CancellationToken | None) -> None:
    """The run's tools, tool specs, system prompt, first messages, limits, loop detector and
    (plan_exec) phase tracker, from the task and the engine; then arm() for the first attempt."""
    task, cfg = run.task, engine.config
    wanted = engine.tools.names() if task.tools is None else task.tools
    # advance_phase belongs to plan_exec, which answers it in the loop (phases.py).
    wanted = [name for name in wanted if name != phases.ADVANCE_TOOL]
    # A skill may name a tool this installation does not provide (or an MCP glob, `git__*`,
    # of a server that did not start): run without it, visibly.
    names, unavailable = expand_tool_names(wanted, engine.tools.names())
    run.unavailable_tools = sorted(unavailable)
    if run.unavailable_tools:
        log.warning("task %s: tools not available: %s", task.task_id, run.unavailable_tools)
    run.tools = engine.tools.subset(names, max_output_chars=cfg.react.tool_output_max_chars)
    run.specs = run.tools.specs() if task.mode != "direct_chat" else ()
    skill_prompt = task.system_prompt
    if task.mode == "plan_exec":  # phases, advance_phase, the mode's instructions first
        run.tracker = PhaseTracker.for_run(cfg.plan_exec, engine.phase_policy)
        run.specs = (*run.specs, phases.ADVANCE_SPEC)
        skill_prompt = f"{phases.PLAN_EXEC_INSTRUCTIONS}\n\n{skill_prompt}".strip()
    alias = cfg.models.get(task.model or cfg.llm.main)
    if task.mode != "direct_chat":
        run.step_temperature = cfg.react.step_temperature
        if alias is not None and alias.tool_choice == "required" and run.specs:
            run.tool_choice = "required"  # the final answer is a tool too (textcalls.py)
            run.specs = (*run.specs, FINAL_ANSWER_SPEC)
        run.nudge_prose = alias is not None and alias.provider != "scripted"  # scripts as written
    run.specs = canonical_tools(run.specs)  # sorted, canonical JSON: cache-stable bytes
    run.system = build_system_prompt(  # stable block, breakpoint, volatile block (prompt.py)
        mode="direct_chat" if task.mode == "direct_chat" else "react",
        skill_prompt=skill_prompt,
        tool_names=[spec.name for spec in run.specs],
        pitfalls=task.pitfalls,
        context=task.context,
        notes=task.notes,
        facts=task.facts,
        repo_map=task.repo_map,
        cache=cfg.prompt_cache.enabled,
    )
    run.messages = [*task.history, Message("user", task.goal)]
    run.max_steps = 1 if task.mode == "direct_chat" else task.max_steps or cfg.react.max_steps
    run.verify = (
        engine.verifier is not None
        and task.mode != "direct_chat"
        and cfg.verification_enabled(task.mode)
    )
    loop_config = cfg.react.loop_detection
    if run.tracker is not None:  # retries look alike: never below 3 (seed 000 RV22)
        loop_config = _plan_exec_loop_config(loop_config)
    run.detector = LoopDetector(loop_config)
    run.repetition_guard = cfg.react.repetition_guard and task.mode != "direct_chat"
    run.batcher = DeltaBatcher(cfg.streaming.flush_interval_ms)  # the model calls' token events
    run.reasoning_batcher = DeltaBatcher(cfg.streaming.flush_interval_ms)  # their reasoning
    arm(cfg, run, cancel)


_loop_configs: list[tuple[LoopDetectionConfig, LoopDetectionConfig]] = []


def _plan_exec_loop_config(config: LoopDetectionConfig) -> LoopDetectionConfig:
    """phases.loop_config(config), made once per config object (a frozen model; the copy is
    most of a plan_exec run's set-up cost), not at every run's start."""
    for given, made in _loop_configs:
        if given is config:
            return made
    made = phases.loop_config(config)
    _loop_configs[:] = [(config, made), *_loop_configs[:3]]  # the last few configs
    return made


def arm(config: AgentkitConfig, run: RunState, cancel: CancellationToken | None) -> None:
    """A fresh interrupter with the wall-time limit and the cancel token, for an attempt."""
    interrupter = run.interrupter = Interrupter()
    wall = config.react.max_wall_seconds
    timer = asyncio.get_running_loop().call_later(
        wall, interrupter.interrupt, lambda: TimedOut(error=structs.wall_time_exceeded(wall))
    )
    run.cleanups.append(timer.cancel)
    if cancel is not None:
        run.cleanups.append(
            cancel.subscribe(
                lambda reason: interrupter.interrupt(
                    lambda: Cancelled(error=structs.cancelled(reason))
                )
            )
        )


async def learn_window(engine: EngineParts, run: RunState) -> None:
    """The context window the run's model server reports, when agentkit.yaml sets none
    (Gateway.context_window: llama.cpp /props, Ollama /api/show): compression starts at half
    of it instead of half the 128k default."""
    learn = getattr(engine.model, "context_window", None)
    compressor = getattr(engine, "compressor", None)
    if learn is None or compressor is None or run.task.mode == "direct_chat":
        return
    try:
        window = await run.interrupter.guard(learn(run.task.model))
    except (asyncio.CancelledError, Finished):
        raise
    except Exception:
        return
    if window:
        run.compress_above = compressor.config.threshold_tokens or window // 2


async def take_baseline(engine: EngineParts, run: RunState) -> None:
    """Before step 1 of a run that verifies: what the workspace already had wrong (the verifier's
    `take_baseline`, verify/baseline.py), so verification judges what the task changed. A
    baseline that cannot be taken only makes verification stricter; it never stops the run."""
    take = getattr(engine.verifier, "take_baseline", None)
    if not run.verify or take is None:
        return
    if (close := getattr(engine.verifier, "close", None)) is not None:
        run.cleanups.append(close)  # a baseline still running at the end stops there
    try:
        await run.interrupter.guard(take())
    except (asyncio.CancelledError, Finished):
        raise
    except Exception:
        log.warning("task %s: no verification baseline", run.task.task_id, exc_info=True)
