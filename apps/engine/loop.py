"""ReActEngine: one async-generator loop. `run(task)` yields events; `execute(task)` drains it.

A run is a sequence of steps. A step checks the limits, asks the model (its text streams out as
batched `token` events), then either runs the tool calls the model made — every mistake of the
model (unknown tool, bad arguments, a failing tool) comes back to it as the tool message — or, when
it called no tool, takes the reply as the final answer: verified if a verifier is given and the
mode has verification on, then submitted. `direct_chat` is a single step without tools.

`plan_exec` is the same loop with a PhaseTracker (phases.py): before a tool runs, the phase's
whitelist and shell filter are checked (a refused call is a `phase_violation` observation and still
a step); `advance_phase` is answered here; step budgets may force the move to verification or
send the best answer to the gate. A verification failure starts a new round of work, after a
reflection (reflexion.py) once re-injections are used up; none left → `gave_up_after_reflections`.

Control flow inside a step uses a tiny exception family (flow.py): `Redirect(*messages)` appends
messages for the model and takes another step; `Finished` (`Submitted`, `Failed`, `Cancelled`,
`GaveUp`) ends the run.
A failing LLM call ends the run as failed. Any other exception is a bug of the engine or of a
port: the run still ends with an `error` event, `task_finished` and its hook, then the exception
propagates. Exactly one lifecycle hook fires, in run()'s one `finally`, so no exit path — a
consumer that stops reading included — can skip it.

Helpers with their own module: streaming.py (delta batching), loop_detection.py, prompt.py,
cancellation.py (cancel token, wall-time limit), fallback.py (error structs, Emergency),
recovery.py, phases.py, reflexion.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from apps.engine import fallback, phases, recovery, reflexion
from apps.engine.cancellation import CancellationToken, Interrupter
from apps.engine.compressor import Compressor
from apps.engine.config import AgentkitConfig, FallbackChainConfig
from apps.engine.events import Event, EventType, tool_call_data, tool_result_data
from apps.engine.flow import (
    Cancelled,
    Failed,
    Finished,
    GaveUp,
    LoopStopped,
    OutOfSteps,
    Redirect,
    SandboxMissing,
    Submitted,
    TimedOut,
    VerificationFailed,
)
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
from apps.engine.loop_detection import LoopDetector, describe_calls
from apps.engine.phases import PhasePolicy, PhaseTracker
from apps.engine.ports import ModelClient, Salvager, TaskHooks, VerificationOutcome, Verifier
from apps.engine.prompt import build_system_prompt, canonical_tools
from apps.engine.sandbox import SandboxUnavailable
from apps.engine.streaming import DeltaBatcher
from apps.engine.task import AgentTask, TaskResult, UsageTotals, VerificationRecord
from apps.engine.tools import ToolResult, ToolSet

log = logging.getLogger(__name__)


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
    tracker: PhaseTracker | None = None  # plan_exec only
    best_answer: str = ""  # the last text the model wrote (plan_exec: the forced gate's answer)
    nudged: bool = False  # an unfinished-looking answer was sent back once (R10)
    recoveries: int = 0  # Recovery attempts made (recovery.py)
    failure: Finished | None = None  # the failed attempt Recovery works on
    edits: list[dict[str, str]] = field(default_factory=list)  # the editor's diffs, in order
    salvage: dict[str, Any] | None = None  # Emergency: what the run changed
    original_error: str | None = None  # Emergency: the failure's own text (owner only)

    def event(self, type: EventType, **data: Any) -> Event:
        self.seq += 1
        return Event(
            type=type, task_id=self.task.task_id, seq=self.seq, ts=datetime.now(UTC), data=data
        )

    def usage_so_far(self) -> dict[str, int]:
        return UsageTotals.of(self.usage, self.llm_calls).model_dump()

    def result(self) -> TaskResult:
        end = self.outcome or Cancelled(error=fallback.interrupted())
        return TaskResult(
            task_id=self.task.task_id,
            status=end.status,
            final=end.final,
            steps=self.steps,
            usage=UsageTotals.of(self.usage, self.llm_calls),
            cost=self.cost,
            error=end.error,
            verification=self.verification,
            phases=self.tracker.counters() if self.tracker else None,
            salvage=self.salvage,
            original_error=self.original_error,
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
        phase_policy: PhasePolicy | None = None,
        fallback: FallbackChainConfig | None = None,
        salvager: Salvager | None = None,
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
        # plan_exec runs use this policy (None: the config's plan_exec section); other modes none.
        self.phase_policy = phase_policy
        # The failure chain of react runs (fallback.py); None: a failed attempt ends the run.
        self.fallback = fallback
        self.salvager = salvager

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
            started = False
            while run.outcome is None:  # an attempt; Recovery (recovery.py) may start another
                try:
                    if not started:
                        started = True
                        self._prepare(run, cancel)
                        yield run.event(
                            "task_started",
                            mode=task.mode,
                            model=task.model or self.config.llm.main,
                            goal=task.goal,
                            tools=sorted({*run.tools.names(), *(spec.name for spec in run.specs)}),
                            unavailable_tools=run.unavailable_tools,
                            max_steps=run.max_steps,
                        )
                    else:
                        async for event in self._recover(run, cancel):
                            yield event
                    while True:
                        try:
                            async for event in self._step(run):
                                yield event
                        except Redirect as redirect:
                            run.messages.extend(redirect.messages)
                except Finished as end:
                    run.outcome = end
                except LLMError as exc:
                    run.outcome = Failed(error=fallback.from_llm_error(exc), cause=exc)
                except Exception as exc:
                    log.exception("engine error in task %s", task.task_id)
                    crash = exc
                    run.outcome = Failed(error=fallback.engine_bug(exc), cause=exc)
                if run.recoveries:
                    yield run.event("recovery_finished", **recovery.finished_data(run))
                if crash is None and recovery.may_recover(self.fallback, run):
                    run.recoveries, run.failure, run.outcome = run.recoveries + 1, run.outcome, None
            if recovery.in_emergency(self.fallback, run):
                await self._emergency(run)
            if run.outcome.status in ("failed", "gave_up_after_reflections"):
                struct = run.outcome.error.model_dump()
                yield run.event("error", step=run.steps, fatal=True, error_struct=struct)
            yield run.event("task_finished", **run.result().event_data())
            if crash is not None:
                raise crash
        except (GeneratorExit, asyncio.CancelledError):
            if run.outcome is None:
                run.outcome = Cancelled(error=fallback.interrupted())
            raise
        finally:
            for cleanup in run.cleanups:
                cleanup()
            await self._fire_hook(run.result())

    # ── the step ───────────────────────────────────────────────────────────────────────────────
    async def _step(self, run: _Run) -> AsyncIterator[Event]:
        run.interrupter.check()  # cancelled, or out of wall time
        if run.steps >= run.max_steps:
            raise OutOfSteps(error=fallback.max_steps_exceeded(run.max_steps))
        if run.tracker is not None:
            for kind, data in run.tracker.begin_step(run.steps + 1):
                yield run.event(kind, **data)
            if run.tracker.forced_gate:  # verify budget used up: the best answer so far
                async for event in self._finish(run, run.best_answer or reflexion.NO_ANSWER):
                    yield event
        run.steps += 1
        async for event in self._query(run):
            yield event
        reply = run.reply
        run.messages.append(Message("assistant", reply.content, tuple(reply.tool_calls)))
        run.best_answer = reply.content.strip() or run.best_answer
        if reply.tool_calls and run.task.mode != "direct_chat":
            async for event in self._act(run, reply.tool_calls):
                yield event
        else:
            async for event in self._answer(run, reply):
                yield event

    async def _query(
        self, run: _Run, request: ChatRequest | None = None, *, show: bool = True
    ) -> AsyncIterator[Event]:
        """One streamed model call; its text goes out as batched token events (unless `show`
        is False: the reflect call's text is shown whole, in its own event)."""
        if request is None:  # the run's own context: compressed first when it grew too long
            async for event in self._compress(run):
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
                elif (text := batcher.push(delta.text)) and show:
                    shown = True
                    yield run.event("token", step=run.steps, text=text)
        except Exception:
            if (rest := batcher.flush()) and show:  # show what did arrive before the failure
                yield run.event("token", step=run.steps, text=rest)
            raise
        finally:
            if hasattr(stream, "aclose"):
                await stream.aclose()
        if (rest := batcher.flush()) and show:
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
        for index, call in enumerate(calls):
            data = tool_call_data(run.steps, call)
            if index == 0:  # the step's first call carries the run's usage so far (live header)
                data.update(usage=run.usage_so_far(), cost=run.cost)
            yield run.event("tool_call", **data)
            started, result = time.monotonic(), None
            if run.tracker is not None:
                result, events = phases.gate_call(run.tracker, call, run.tools)
                for kind, data in events:
                    yield run.event(kind, **data)
            token = phases.bind_command_filter(run.tracker) if run.tracker else None
            try:
                result = result or await run.interrupter.guard(
                    run.tools.safe_execute(
                        call.name, call.arguments, arguments_error=call.arguments_error
                    )
                )
            except Finished as stop:  # cancelled or out of time while the tool ran
                interrupted = ToolResult.failure("interrupted", f"interrupted: {stop}")
                yield run.event(
                    "tool_result", **tool_result_data(run.steps, call, interrupted, started)
                )
                raise
            finally:
                if token is not None:
                    phases.reset_command_filter(token)
            yield run.event("tool_result", **tool_result_data(run.steps, call, result, started))
            if result.ok and isinstance(diff := result.data.get("diff"), str) and diff:
                run.edits.append({"path": str(result.data.get("path", "")), "diff": diff})
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
        action = describe_calls(calls) if acted else None
        async for event in self._detect_loop(run, action, "\n".join(observations), any_error):
            yield event

    async def _answer(self, run: _Run, reply: ChatResponse) -> AsyncIterator[Event]:
        """A reply without tool calls: the final answer, once it is a complete one and verified."""
        if run.task.mode != "direct_chat" and (problem := reflexion.not_an_answer(reply)):
            async for event in self._detect_loop(run, None, prefix=problem):
                yield event
            raise Redirect(Message("user", problem))
        reason = run.tracker is not None and not run.nudged and reflexion.unfinished(reply.content)
        if reason:  # plan_exec: an answer that says it is unfinished goes back once (R10)
            run.nudged = True
            raise Redirect(reflexion.finish_request(reason))
        async for event in self._finish(run, reply.content):
            yield event

    async def _finish(self, run: _Run, answer: str) -> AsyncIterator[Event]:
        """The final-answer gate: verified when the mode has verification on, then submitted."""
        if run.verify:
            try:
                outcome = await run.interrupter.guard(self.verifier(answer))
            except SandboxUnavailable as exc:
                raise SandboxMissing(answer, fallback.sandbox_unavailable(exc)) from None
            async for event in self._check_verification(run, answer, outcome):
                yield event
        yield run.event("final_answer", step=run.steps, text=answer)
        raise Submitted(answer)

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
            raise LoopStopped(error=fallback.loop_detected(verdict))
        warning = fallback.loop_suspected(verdict)
        yield run.event("error", step=run.steps, fatal=False, error_struct=warning.model_dump())
        raise Redirect(Message("user", f"{prefix}\n\n{verdict.message}".strip()))

    async def _check_verification(
        self, run: _Run, answer: str, outcome: VerificationOutcome
    ) -> AsyncIterator[Event]:
        """Failed → the errors go back to the model (max_reinjections times); then, in
        plan_exec, a reflection and another round while the quota lasts; then the run ends:
        failed with the verification log, or gave_up_after_reflections once it had reflected."""
        limit = self.config.react.tool_output_max_chars
        record = reflexion.record_of(outcome, len(run.verification) + 1, limit)
        run.verification.append(record)
        move = None if record.passed else reflexion.next_move(record, run.tracker, self.config)
        reinjected = move is not None and move.action == "reinject"
        yield run.event("verification_result", **record.model_dump(), reinjected=reinjected)
        if move is None:
            return
        run.detector.reset()  # new information: earlier steps no longer say anything about loops
        for kind, data in move.events:
            yield run.event(kind, **data)
        if move.action == "fail":
            raise VerificationFailed(
                answer, fallback.verification_failed(record.attempt, record.errors)
            )
        if move.action == "give_up":
            error = fallback.gave_up_after_reflections(run.tracker.reflect_used, record.errors)
            raise GaveUp(answer, error)
        if move.action == "reinject":
            message = reflexion.reinjection(record, limit)
        else:
            event, message = await self._reflect(run, record)
            yield event
        if run.tracker is not None:
            kind, data = run.tracker.new_round(run.steps)
            yield run.event(kind, **data)
        raise Redirect(message)

    async def _reflect(self, run: _Run, record: VerificationRecord) -> tuple[Event, Message]:
        """One reflect call on the main model: a step of no phase. Returns its event and the
        message for the next round; a failed call leaves the verification errors alone."""
        limit, tracker = self.config.react.tool_output_max_chars, run.tracker
        tracker.reflect_used += 1
        run.steps = tracker.step = run.steps + 1
        request = reflexion.reflect_request(run.messages, run.system, record, limit)
        try:
            async for _nothing in self._query(run, request, show=False):
                pass
            if not (text := run.reply.content.strip()):
                raise LLMError("the reflect call returned no text")
            data: dict[str, Any] = {"ok": True, "text": text}
            message = reflexion.reflection_message(text, record, limit)
        except LLMError as exc:
            data = {"ok": False, "error": fallback.from_llm_error(exc).model_dump()}
            message = reflexion.reinjection(record, limit)
        counters = tracker.counters()
        event = run.event(
            "reflection", step=run.steps, attempt=tracker.reflect_used, **data, counters=counters
        )
        return event, message

    # ── set-up and tear-down ───────────────────────────────────────────────────────────────────
    def _prepare(self, run: _Run, cancel: CancellationToken | None) -> None:
        task, cfg = run.task, self.config
        wanted = self.tools.names() if task.tools is None else task.tools
        # advance_phase belongs to plan_exec, which answers it in the loop (phases.py).
        wanted = [name for name in wanted if name != phases.ADVANCE_TOOL]
        # A skill may name a tool this installation does not provide: run without it, visibly.
        run.unavailable_tools = sorted(set(wanted) - set(self.tools.names()))
        if run.unavailable_tools:
            log.warning("task %s: tools not available: %s", task.task_id, run.unavailable_tools)
        names = [name for name in wanted if name in self.tools]
        run.tools = self.tools.subset(names, max_output_chars=cfg.react.tool_output_max_chars)
        run.specs = run.tools.specs() if task.mode != "direct_chat" else ()
        skill_prompt = task.system_prompt
        if task.mode == "plan_exec":  # phases, advance_phase, the mode's instructions first
            run.tracker = PhaseTracker.for_run(cfg.plan_exec, self.phase_policy)
            run.specs = (*run.specs, phases.ADVANCE_SPEC)
            skill_prompt = f"{phases.PLAN_EXEC_INSTRUCTIONS}\n\n{skill_prompt}".strip()
        run.specs = canonical_tools(run.specs)  # sorted, canonical JSON: cache-stable bytes
        run.system = build_system_prompt(  # stable block, breakpoint, volatile block (prompt.py)
            mode="direct_chat" if task.mode == "direct_chat" else "react",
            skill_prompt=skill_prompt,
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
            and task.mode != "direct_chat"
            and cfg.verification_enabled(task.mode)
        )
        loop_config = cfg.react.loop_detection
        if run.tracker is not None:  # retries look alike: never below 3 (seed 000 RV22)
            loop_config = phases.loop_config(loop_config)
        run.detector = LoopDetector(loop_config)
        self._arm(run, cancel)

    def _arm(self, run: _Run, cancel: CancellationToken | None) -> None:
        """A fresh interrupter with the wall-time limit and the cancel token, for an attempt."""
        interrupter = run.interrupter = Interrupter()
        wall = self.config.react.max_wall_seconds
        timer = asyncio.get_running_loop().call_later(
            wall, interrupter.interrupt, lambda: TimedOut(error=fallback.wall_time_exceeded(wall))
        )
        run.cleanups.append(timer.cancel)
        if cancel is not None:
            run.cleanups.append(
                cancel.subscribe(
                    lambda reason: interrupter.interrupt(
                        lambda: Cancelled(error=fallback.cancelled(reason))
                    )
                )
            )

    # ── the failure chain (fallback.py) ────────────────────────────────────────────────────────
    async def _recover(self, run: _Run, cancel: CancellationToken | None) -> AsyncIterator[Event]:
        """Recovery: a fresh time and step budget, one reflect call on the main model about the
        failed attempt, then the next attempt continues the same conversation."""
        self._arm(run, cancel)
        recovery.close_dangling_calls(run.messages)
        run.detector.reset()
        error = run.failure.error or fallback.engine_bug(run.failure)
        run.steps += 1
        request = recovery.reflect_request(run.messages, run.system, error)
        text, reflection = "", {"ok": False}
        try:
            async for _nothing in self._query(run, request, show=False):
                pass
            if not (text := run.reply.content.strip()):
                raise LLMError("the reflect call returned no text")
            reflection = {"ok": True, "text": text}
        except LLMError as exc:
            reflection = {"ok": False, "error": fallback.from_llm_error(exc).model_dump()}
        run.max_steps = run.steps + (run.task.max_steps or self.config.react.max_steps)
        run.messages.append(recovery.retry_message(error, text))
        yield run.event(
            "recovery_started",
            step=run.steps,
            attempt=run.recoveries,
            max_retries=self.fallback.recovery.max_retries,
            error_struct=error.model_dump(),
            reflection=reflection,
        )

    async def _emergency(self, run: _Run) -> None:
        """Emergency: the failure as a rule-based structured error, and what the run changed."""
        emergency = fallback.EmergencyRules.classify(run.outcome, self.fallback)
        run.original_error = emergency.original_error
        run.outcome = Failed(run.outcome.final, emergency.to_struct(), cause=run.outcome.cause)
        run.salvage = recovery.edits_salvage(run.edits)
        if self.salvager is not None:
            try:
                run.salvage = await asyncio.wait_for(self.salvager(list(run.edits)), 30)
            except Exception:
                log.warning("salvage failed for task %s", run.task.task_id, exc_info=True)

    async def _fire_hook(self, result: TaskResult) -> None:
        hook = {
            "completed": self.hooks.on_task_complete,
            "failed": self.hooks.on_task_failed,
            "cancelled": self.hooks.on_task_cancelled,
            # Gave up is a failure for whoever learns from outcomes (seed 000 KTD-8).
            "gave_up_after_reflections": self.hooks.on_task_failed,
        }[result.status]
        try:
            await hook(result)
        except Exception:  # a hook cannot change the outcome of the run (seed 000 KTD-4)
            log.exception("%s raised for task %s", hook.__name__, result.task_id)
