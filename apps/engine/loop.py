"""ReActEngine: one async-generator loop. `run(task)` yields events; `execute(task)` drains it.

A run is a sequence of steps. A step checks the limits, asks the model (its text streams out as
batched `token` events), then either runs the tool calls the model made — every mistake of the
model (unknown tool, bad arguments, a failing tool) comes back to it as the tool message — or, when
it called no tool, takes the reply as the final answer: verified if a verifier is given and the
mode has verification on, then submitted. `direct_chat` is a single step without tools.

Control flow inside a step uses a tiny exception family: `Redirect(*messages)` appends messages for
the model and takes another step; `Finished` (`Submitted`, `Failed`, `Cancelled`) ends the run.
A failing LLM call ends the run as failed. Any other exception is a bug of the engine or of a
port: the run still ends with an `error` event, `task_finished` and its hook, then the exception
propagates. Exactly one lifecycle hook fires, in run()'s one `finally`, so no exit path — a
consumer that stops reading included — can skip it.

Helpers with their own module: streaming.py (delta batching), loop_detection.py, prompt.py,
cancellation.py (cancel token, wall-time limit), failures.py (error structs).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from apps.engine import failures
from apps.engine.cancellation import CancellationToken, Interrupter
from apps.engine.compressor import Compressor
from apps.engine.config import AgentkitConfig
from apps.engine.events import ErrorStruct, Event, EventType, FinalStatus
from apps.engine.llm.errors import LLMError
from apps.engine.llm.types import (
    ChatRequest,
    ChatResponse,
    Message,
    TextBlock,
    ToolCall,
    ToolSpec,
    Usage,
)
from apps.engine.loop_detection import LoopDetector
from apps.engine.ports import ModelClient, TaskHooks, VerificationOutcome, Verifier
from apps.engine.prompt import build_system_prompt, canonical_tools
from apps.engine.streaming import DeltaBatcher
from apps.engine.task import AgentTask, TaskResult, UsageTotals, VerificationRecord
from apps.engine.tools import ToolResult, ToolSet, truncate_output

log = logging.getLogger(__name__)

EMPTY_REPLY = "Your reply was empty. Call a tool to make progress, or give your final answer."
CUT_OFF_REPLY = (
    "Your reply was cut off at the output-token limit, so it cannot be the final answer. Give a "
    "shorter final answer, or call a tool."
)


class InterruptAgentFlow(Exception):
    """Raised inside a step to change the course of the run; handled only in run()."""


class Redirect(InterruptAgentFlow):
    """Tell the model something (verification errors, a loop warning) and take another step."""

    def __init__(self, *messages: Message):
        super().__init__(*(m.content for m in messages))
        self.messages = messages


class Finished(InterruptAgentFlow):
    status: ClassVar[FinalStatus]

    def __init__(self, final: str = "", error: ErrorStruct | None = None):
        super().__init__(error.message if error else final)
        self.final = final
        self.error = error


class Submitted(Finished):
    status = "completed"


class Failed(Finished):
    status = "failed"


class Cancelled(Finished):
    status = "cancelled"


@dataclass(eq=False, slots=True)
class _Run:
    """The state of one run. The engine itself keeps none, so runs may overlap."""

    task: AgentTask
    tools: ToolSet = field(default_factory=ToolSet)
    specs: tuple[ToolSpec, ...] = ()  # what the model is offered: the same bytes every step
    unavailable_tools: list[str] = field(default_factory=list)
    system: tuple[TextBlock, ...] = ()
    messages: list[Message] = field(default_factory=list)
    max_steps: int = 1
    verify: bool = False
    detector: LoopDetector = field(default_factory=LoopDetector)
    interrupter: Interrupter | None = None
    cleanups: list[Callable[[], object]] = field(default_factory=list)
    seq: int = 0
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    llm_calls: int = 0
    reply: ChatResponse | None = None
    verification: list[VerificationRecord] = field(default_factory=list)
    outcome: Finished | None = None

    def event(self, type: EventType, **data: Any) -> Event:
        self.seq += 1
        return Event(
            type=type, task_id=self.task.task_id, seq=self.seq, ts=datetime.now(UTC), data=data
        )

    def result(self) -> TaskResult:
        end = self.outcome or Cancelled(error=failures.interrupted())
        return TaskResult(
            task_id=self.task.task_id,
            status=end.status,
            final=end.final,
            steps=self.steps,
            usage=UsageTotals.of(self.usage, self.llm_calls),
            cost=self.cost,
            error=end.error,
            verification=self.verification,
        )


class ReActEngine:
    def __init__(
        self,
        model: ModelClient,
        tools: ToolSet | None = None,
        config: AgentkitConfig | None = None,
        *,
        verifier: Verifier | None = None,
        hooks: TaskHooks | None = None,
        non_action_tools: Iterable[str] = ("think",),
        compressor: Compressor | None = None,
    ):
        self.model = model
        self.tools = tools or ToolSet()
        self.config = config or AgentkitConfig()
        self.verifier = verifier
        self.hooks = hooks or TaskHooks()
        # Calls of these tools are not actions for loop detection: only thinking is a monologue.
        self.non_action_tools = frozenset(non_action_tools)
        # Context compression (compressor.py); by default from config, on the same model client.
        self.compressor = compressor or Compressor.from_config(model, self.config)

    async def execute(
        self, task: AgentTask, *, cancel: CancellationToken | None = None
    ) -> TaskResult:
        """Run to the end and return the TaskResult: the same run as run(), events dropped."""
        last: Event | None = None
        async with aclosing(self.run(task, cancel=cancel)) as events:
            async for event in events:
                last = event
        return TaskResult.from_event(last)

    async def run(
        self, task: AgentTask, *, cancel: CancellationToken | None = None
    ) -> AsyncIterator[Event]:
        """The loop. Consume it with `async with aclosing(engine.run(task)) as events`."""
        run = _Run(task)
        crash: Exception | None = None
        try:
            try:
                self._prepare(run, cancel)
                yield run.event(
                    "task_started",
                    mode=task.mode,
                    model=task.model or self.config.llm.main,
                    goal=task.goal,
                    tools=run.tools.names(),
                    unavailable_tools=run.unavailable_tools,
                    max_steps=run.max_steps,
                )
                while True:
                    try:
                        async for event in self._step(run):
                            yield event
                    except Redirect as redirect:
                        run.messages.extend(redirect.messages)
            except Finished as end:
                run.outcome = end
            except LLMError as exc:
                run.outcome = Failed(error=failures.from_llm_error(exc))
            except Exception as exc:
                log.exception("engine error in task %s", task.task_id)
                crash, run.outcome = exc, Failed(error=failures.engine_bug(exc))
            if run.outcome.status == "failed":
                struct = run.outcome.error.model_dump()
                yield run.event("error", step=run.steps, fatal=True, error_struct=struct)
            yield run.event("task_finished", **run.result().event_data())
            if crash is not None:
                raise crash
        except (GeneratorExit, asyncio.CancelledError):
            if run.outcome is None:
                run.outcome = Cancelled(error=failures.interrupted())
            raise
        finally:
            for cleanup in run.cleanups:
                cleanup()
            await self._fire_hook(run.result())

    # ── the step ───────────────────────────────────────────────────────────────────────────────
    async def _step(self, run: _Run) -> AsyncIterator[Event]:
        run.interrupter.check()  # cancelled, or out of wall time
        if run.steps >= run.max_steps:
            raise Failed(error=failures.max_steps_exceeded(run.max_steps))
        run.steps += 1
        async for event in self._query(run):
            yield event
        reply = run.reply
        run.messages.append(Message("assistant", reply.content, tuple(reply.tool_calls)))
        if reply.tool_calls and run.task.mode == "react":
            async for event in self._act(run, reply.tool_calls):
                yield event
        else:
            async for event in self._answer(run, reply):
                yield event

    async def _query(self, run: _Run) -> AsyncIterator[Event]:
        """One streamed model call; its text goes out as batched token events."""
        async for event in self._compress(run):  # context compression, before the request
            yield event
        request = ChatRequest(tuple(run.messages), run.system, run.specs)
        batcher = DeltaBatcher(self.config.streaming.flush_interval_ms)
        run.reply, shown = None, False
        stream = self.model.stream(request, model=run.task.model)
        try:
            while run.reply is None:
                try:
                    delta = await run.interrupter.guard(anext(stream))
                except StopAsyncIteration:
                    raise RuntimeError("the model stream ended without a final response") from None
                if delta.restart:  # the call is being retried: the text so far is void
                    batcher.discard()
                    if shown:
                        yield run.event("token", step=run.steps, text="", restart=True)
                        shown = False
                elif delta.response is not None:
                    run.reply = delta.response
                elif text := batcher.push(delta.text):
                    shown = True
                    yield run.event("token", step=run.steps, text=text)
        except Exception:
            if rest := batcher.flush():  # show what did arrive before the failure
                yield run.event("token", step=run.steps, text=rest)
            raise
        finally:
            if hasattr(stream, "aclose"):
                await stream.aclose()
        if rest := batcher.flush():
            yield run.event("token", step=run.steps, text=rest)
        run.usage += run.reply.usage
        run.cost += run.reply.cost
        run.llm_calls += 1

    async def _compress(self, run: _Run) -> AsyncIterator[Event]:
        """Past the threshold, the middle of the conversation becomes a summary (compressor.py)."""
        if self.compressor is None:
            return
        done = await run.interrupter.guard(
            self.compressor.compress_if_needed(
                run.messages,
                system=run.system,
                tools=run.specs,
                model=run.task.model,
                goal=run.task.goal,
            )
        )
        if done is None:
            return
        run.messages = done.messages
        run.usage += done.usage
        run.cost += done.cost
        run.llm_calls += done.llm_calls
        yield run.event("compression", step=run.steps, **done.event_data())

    async def _act(self, run: _Run, calls: Sequence[ToolCall]) -> AsyncIterator[Event]:
        """Run the tool calls in order; each result is the model's next observation."""
        observations, any_error = [], False
        for call in calls:
            yield run.event("tool_call", **_call_data(run.steps, call))
            started = time.monotonic()
            try:
                result = await run.interrupter.guard(
                    run.tools.safe_execute(
                        call.name, call.arguments, arguments_error=call.arguments_error
                    )
                )
            except Finished as stop:  # cancelled or out of time while the tool ran
                interrupted = ToolResult.failure("interrupted", f"interrupted: {stop}")
                yield run.event(
                    "tool_result", **_result_data(run.steps, call, interrupted, started)
                )
                raise
            yield run.event("tool_result", **_result_data(run.steps, call, result, started))
            observation = result.for_model()
            run.messages.append(
                Message(
                    "tool",
                    observation,
                    tool_call_id=call.id,
                    name=call.name,
                    is_error=not result.ok,
                )
            )
            observations.append(observation)
            any_error = any_error or not result.ok
        acted = any(call.name not in self.non_action_tools for call in calls)
        action = _describe_calls(calls) if acted else None
        async for event in self._detect_loop(run, action, "\n".join(observations), any_error):
            yield event

    async def _answer(self, run: _Run, reply: ChatResponse) -> AsyncIterator[Event]:
        """A reply without tool calls: the final answer, once it is a complete one and verified."""
        if run.task.mode == "react" and (problem := _not_an_answer(reply)):
            async for event in self._detect_loop(run, None, prefix=problem):
                yield event
            raise Redirect(Message("user", problem))
        if run.verify:
            outcome = await run.interrupter.guard(self.verifier(reply.content))
            async for event in self._check_verification(run, reply.content, outcome):
                yield event
        yield run.event("final_answer", step=run.steps, text=reply.content)
        raise Submitted(reply.content)

    # ── quality-loop hooks ─────────────────────────────────────────────────────────────────────
    async def _detect_loop(
        self,
        run: _Run,
        action: str | None,
        observation: str = "",
        error: bool = False,
        *,
        prefix: str = "",
    ) -> AsyncIterator[Event]:
        """First detection: warn the model (one recovery message); if it goes on: stop."""
        verdict = run.detector.record(action, observation, error=error)
        if verdict is None:
            return
        if verdict.fatal:
            raise Failed(error=failures.loop_detected(verdict))
        warning = failures.loop_suspected(verdict)
        yield run.event("error", step=run.steps, fatal=False, error_struct=warning.model_dump())
        raise Redirect(Message("user", f"{prefix}\n\n{verdict.message}".strip()))

    async def _check_verification(
        self, run: _Run, answer: str, outcome: VerificationOutcome
    ) -> AsyncIterator[Event]:
        """Failed → the errors go back to the model as a user message (max_reinjections times);
        still failing → the run fails with the verification log."""
        limit = self.config.react.tool_output_max_chars
        record = VerificationRecord(
            attempt=len(run.verification) + 1,
            passed=outcome.passed,
            errors=list(outcome.errors),
            log=truncate_output(outcome.log, limit),
            commands=list(outcome.commands),
            summary=outcome.summary,
        )
        run.verification.append(record)
        reinject = not record.passed and record.attempt <= self.config.verification.max_reinjections
        yield run.event("verification_result", **record.model_dump(), reinjected=reinject)
        if record.passed:
            return
        if not reinject:
            raise Failed(answer, failures.verification_failed(record.attempt, record.errors))
        run.detector.reset()  # new information: earlier steps no longer say anything about loops
        errors = "\n".join(f"- {error}" for error in record.errors) or "- (no details given)"
        raise Redirect(
            Message(
                "user",
                truncate_output(
                    "Verification of your final answer failed:\n"
                    f"{errors}\n\nFix these problems, then give your final answer again.",
                    limit,
                ),
            )
        )

    # ── set-up and tear-down ───────────────────────────────────────────────────────────────────
    def _prepare(self, run: _Run, cancel: CancellationToken | None) -> None:
        task, cfg = run.task, self.config
        wanted = self.tools.names() if task.tools is None else task.tools
        # A skill may name a tool this installation does not provide: run without it, visibly.
        run.unavailable_tools = sorted(set(wanted) - set(self.tools.names()))
        if run.unavailable_tools:
            log.warning("task %s: tools not available: %s", task.task_id, run.unavailable_tools)
        names = [name for name in wanted if name in self.tools]
        run.tools = self.tools.subset(names, max_output_chars=cfg.react.tool_output_max_chars)
        run.specs = canonical_tools(run.tools.specs()) if task.mode == "react" else ()
        run.system = build_system_prompt(  # stable block, breakpoint, volatile block (prompt.py)
            mode=task.mode,
            skill_prompt=task.system_prompt,
            tool_names=[spec.name for spec in run.specs],
            pitfalls=task.pitfalls,
            context=task.context,
            notes=task.notes,
            facts=task.facts,
            cache=cfg.prompt_cache.enabled,
        )
        run.messages = [*task.history, Message("user", task.goal)]
        run.max_steps = 1 if task.mode == "direct_chat" else task.max_steps or cfg.react.max_steps
        run.verify = (
            self.verifier is not None
            and task.mode == "react"
            and cfg.verification_enabled(task.mode)
        )
        run.detector = LoopDetector(cfg.react.loop_detection)
        interrupter = run.interrupter = Interrupter()
        wall = cfg.react.max_wall_seconds
        timer = asyncio.get_running_loop().call_later(
            wall, interrupter.interrupt, lambda: Failed(error=failures.wall_time_exceeded(wall))
        )
        run.cleanups.append(timer.cancel)
        if cancel is not None:
            run.cleanups.append(
                cancel.subscribe(
                    lambda reason: interrupter.interrupt(
                        lambda: Cancelled(error=failures.cancelled(reason))
                    )
                )
            )

    async def _fire_hook(self, result: TaskResult) -> None:
        hook = {
            "completed": self.hooks.on_task_complete,
            "failed": self.hooks.on_task_failed,
            "cancelled": self.hooks.on_task_cancelled,
        }[result.status]
        try:
            await hook(result)
        except Exception:  # a hook cannot change the outcome of the run (seed 000 KTD-4)
            log.exception("%s raised for task %s", hook.__name__, result.task_id)


def _not_an_answer(reply: ChatResponse) -> str | None:
    if reply.finish_reason == "length":
        return CUT_OFF_REPLY
    if not reply.content.strip():
        return EMPTY_REPLY
    return None


def _describe_calls(calls: Sequence[ToolCall]) -> str:
    """Canonical text of a step's action (sorted keys), for loop detection."""
    return "; ".join(
        f"{call.name} "
        + (
            call.raw_arguments
            if call.arguments_error
            else json.dumps(call.arguments, sort_keys=True)
        )
        for call in calls
    )


def _call_data(step: int, call: ToolCall) -> dict[str, Any]:
    data = {"step": step, "call_id": call.id, "name": call.name, "arguments": call.arguments}
    if call.arguments_error:
        data.update(arguments_error=call.arguments_error, raw_arguments=call.raw_arguments)
    return data


def _result_data(step: int, call: ToolCall, result: ToolResult, started: float) -> dict[str, Any]:
    return {
        "step": step,
        "call_id": call.id,
        "name": call.name,
        **result.as_dict(),
        "duration_ms": round((time.monotonic() - started) * 1000, 3),
    }
