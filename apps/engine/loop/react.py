"""ReActEngine: one async-generator loop. `run(task)` yields events; `execute(task)` drains it.

A run is a sequence of steps. A step checks the limits, asks the model (its text streams out as
batched `token` events, its reasoning as batched `reasoning` events; the reply's signed thinking
blocks stay on its assistant message for the next call), then either runs the tool calls the
model made — every mistake of the model (unknown tool, bad arguments, a failing tool) comes back
to it as the tool message — or, when it called no tool, takes the reply as the final answer:
verified if a verifier is given and the mode has verification on, then submitted. `direct_chat`
is a single step without tools.

`plan_exec` is the same loop with a PhaseTracker (plan/phases.py): before a tool runs, the phase's
whitelist and shell filter are checked (plan/gate.py; a refused call is a `phase_violation`
observation and still a step); `advance_phase` is answered here; step budgets may force the move
to verification or send the best answer to the gate. A failed verification starts another round
(after a reflection, plan/reflexion.py, once re-injections are used up); then it gives up.

Control flow inside a step uses a tiny exception family (loop/flow.py): `Redirect(*messages)` appends
messages for the model and takes another step (caught in the step loop, `_steps`); `Finished`
(`Submitted`, `Failed`, `Cancelled`, `GaveUp`) ends the attempt (caught in run()).
The steps of an attempt run in one generator (`_steps`), the model call and the tool calls inline:
a step is the hot path (bench/engine_overhead.py), and each generator level costs per step and per
event. Reflect calls (`_ask`) read the model through `_call`, which shows no text.
A failing LLM call ends the run as failed. Any other exception is a bug of the engine or of a
port: the run still ends with an `error` event, `task_finished` and its hook, then the exception
propagates. Exactly one lifecycle hook fires, in run()'s one `finally`, so no exit path — a
consumer that stops reading included — can skip it.

A `prelude` (plan_exec's spec stage, plan/spec_stage.py: plan, review) runs after task_started.
State: RunState (loop/state.py), set up by loop/setup.py; the engine keeps none. The helpers are
this package's modules (acceptance.py: the final-answer path, the loop detector's verdicts),
context/, plan/ (verification_gate: verify, re-inject, reflect, give up) and failure/ (structs,
Emergency, Recovery).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import aclosing

from apps.engine.config import AgentkitConfig, FallbackChainConfig
from apps.engine.context.compressor import Compressor
from apps.engine.events import Event, tool_call_data, tool_result_data
from apps.engine.failure import recovery, structs
from apps.engine.llm.errors import ContextWindowError, LLMError
from apps.engine.llm.types import ChatRequest, ChatResponse, Message, ToolCall
from apps.engine.loop import acceptance
from apps.engine.loop import setup as run_setup
from apps.engine.loop.cancellation import CancellationToken
from apps.engine.loop.compression import compress_after_overflow, compress_run, compression_due
from apps.engine.loop.detection import describe_calls
from apps.engine.loop.flow import Cancelled, Failed, Finished, OutOfSteps, Redirect, RunawayStopped
from apps.engine.loop.runaway import MAX_CUTS, Cut, StepWatch, cut_message, runaway_error
from apps.engine.loop.state import READ_ONLY_TOOLS, RunState
from apps.engine.loop.textcalls import read_calls
from apps.engine.plan import gate as phase_gate
from apps.engine.plan import reflexion
from apps.engine.plan.phases import PhasePolicy
from apps.engine.ports import ModelClient, Salvager, TaskHooks, Verifier, fire_hook
from apps.engine.task import AgentTask, TaskResult
from apps.engine.tools import ToolResult, ToolSet

log = logging.getLogger(__name__)
Prelude = Callable[[RunState, CancellationToken | None], AsyncIterator[Event]]


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
        prelude: Prelude | None = None,
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
        self.prelude = prelude  # after task_started, before step 1 (plan_exec: spec_stage.py)

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
        run = RunState(task)
        crash: Exception | None = None
        try:
            started = False
            while run.outcome is None:  # an attempt; Recovery (recovery.py) may start another
                try:
                    if not started:
                        started = True
                        run_setup.prepare(self, run, cancel)
                        yield run.event(
                            "task_started",
                            mode=task.mode,
                            model=task.model or self.config.llm.main,
                            goal=task.goal,
                            tools=sorted({*run.tools.names(), *(spec.name for spec in run.specs)}),
                            unavailable_tools=run.unavailable_tools,
                            max_steps=run.max_steps,
                        )
                        if self.prelude is not None:
                            async for event in self.prelude(run, cancel):
                                yield event
                            # the work's time budget starts now
                            run_setup.arm(self.config, run, cancel)
                        await run_setup.learn_window(self, run)
                        await run_setup.take_baseline(self, run)
                    else:  # Recovery: a fresh time budget, a reflection, the retry message
                        run_setup.arm(self.config, run, cancel)
                        steps = run.task.max_steps or self.config.react.max_steps
                        yield await recovery.start_attempt(run, self._ask, self.fallback, steps)
                    async for event in self._steps(run):
                        yield event
                except Finished as end:
                    run.outcome = end
                except LLMError as exc:
                    run.outcome = Failed(error=structs.from_llm_error(exc), cause=exc)
                except Exception as exc:
                    log.exception("engine error in task %s", task.task_id)
                    crash = exc
                    run.outcome = Failed(error=structs.engine_bug(exc), cause=exc)
                if run.recoveries:
                    yield run.event("recovery_finished", **recovery.finished_data(run))
                if crash is None and recovery.may_recover(self.fallback, run):
                    run.recoveries, run.failure, run.outcome = run.recoveries + 1, run.outcome, None
            if recovery.in_emergency(self.fallback, run):
                await recovery.emergency(run, self.fallback, self.salvager)
            if run.outcome.status in ("failed", "gave_up_after_reflections"):
                struct = run.outcome.error.model_dump()
                yield run.event("error", step=run.steps, fatal=True, error_struct=struct)
            answer_chars = self.config.limits.answer_chars
            yield run.event("task_finished", **run.result().event_data(answer_chars))
            if crash is not None:
                raise crash
        except (GeneratorExit, asyncio.CancelledError):
            if run.outcome is None:
                run.outcome = Cancelled(error=structs.interrupted())
            raise
        finally:
            for cleanup in run.cleanups:
                cleanup()
            await fire_hook(self.hooks, run.result())

    # ── the steps ──────────────────────────────────────────────────────────────────────────────
    async def _steps(self, run: RunState) -> AsyncIterator[Event]:
        """The attempt's steps until one raises Finished. One generator for all of them, the model
        call and the tool calls inline: a step is the hot path, and a generator per step, per
        model call or per batch of calls (created, hooked, closed, each event passed up through
        it) is a cost of its own."""
        while True:
            try:
                run.interrupter.check()  # cancelled, or out of wall time
                if run.steps >= run.max_steps:
                    raise OutOfSteps(error=structs.max_steps_exceeded(run.max_steps))
                if (tracker := run.tracker) is not None:
                    if events := tracker.begin_step(run.steps + 1):  # the usual step: none
                        for kind, data in events:
                            yield run.event(kind, **data)
                    if tracker.forced_gate:  # verify budget used up: the best answer so far
                        best = run.best_answer or reflexion.NO_ANSWER
                        gate = acceptance.finish(run, best, self.verifier, self.config, self._ask)
                        async for event in gate:
                            yield event
                run.steps += 1
                # The model call on the run's own context (compressed first when it grew too
                # long); its text goes out as batched token events (reflect calls, _call, show
                # none).
                due = compression_due(self.compressor, run)
                if due and (compressed := await compress_run(self.compressor, run)) is not None:
                    yield compressed
                request = ChatRequest(
                    tuple(run.messages),
                    run.system,
                    run.specs,
                    tool_choice=run.tool_choice,
                    default_temperature=run.step_temperature,
                )
                batcher = run.batcher.begin()  # a new call: its first text goes out at once
                thoughts = run.reasoning_batcher.begin()  # its reasoning: `reasoning` events
                run.reply, shown, thought, guard = None, False, False, run.interrupter.guard
                watch = StepWatch(self.config.react.step_wall_seconds, run.repetition_guard)
                stream = self.model.stream(request, model=run.task.model)
                try:
                    while run.reply is None:
                        try:
                            delta = await guard(anext(stream))
                        except StopAsyncIteration:
                            raise RuntimeError(_NO_RESPONSE) from None
                        if delta.restart:  # the call is being retried: the text so far is void
                            watch.restart()
                            batcher.discard()
                            thoughts.discard()
                            if shown:
                                yield run.event("token", step=run.steps, text="", restart=True)
                                shown = False
                            if thought:
                                yield run.event("reasoning", step=run.steps, text="", restart=True)
                                thought = False
                        elif delta.response is not None:
                            run.reply = delta.response
                        elif delta.reasoning:
                            if text := thoughts.push(delta.reasoning):
                                thought = True
                                yield run.event_of("reasoning", {"step": run.steps, "text": text})
                            watch.tick(delta.reasoning)
                        elif delta.call:  # a tool call streaming: its time counts, not shown
                            watch.tick(delta.call)
                        else:
                            if thought and (rest := thoughts.flush()):  # reasoning comes first
                                yield run.event_of("reasoning", {"step": run.steps, "text": rest})
                            if text := batcher.push(delta.text):
                                shown = True
                                yield run.event_of("token", {"step": run.steps, "text": text})
                            watch.push(delta.text)
                except Exception as exc:  # cut, out of time, cancelled, a broken stream
                    if not isinstance(exc, Cut) and (watch.arrived or isinstance(exc, Finished)):
                        _count(run, watch.partial(request))  # the prompt sent, the text so far
                    if rest := thoughts.flush():
                        yield run.event_of("reasoning", {"step": run.steps, "text": rest})
                    if rest := batcher.flush():  # show what did arrive before the failure
                        yield run.event_of("token", {"step": run.steps, "text": rest})
                    raise
                finally:
                    if hasattr(stream, "aclose"):
                        await stream.aclose()
                if rest := thoughts.flush():
                    yield run.event_of("reasoning", {"step": run.steps, "text": rest})
                if rest := batcher.flush():
                    yield run.event_of("token", {"step": run.steps, "text": rest})
                reply = run.reply
                _count(run, reply)
                calls_as_text = (
                    run.specs
                    and run.task.mode != "direct_chat"
                    and await read_calls(run, request, reply, self._call)  # textcalls.py
                )
                if calls_as_text and shown:  # shown as the call it is, not as its JSON
                    yield run.event("token", step=run.steps, text="", restart=True)
                # Message("assistant", content, calls, thinking=...), positionally: the thinking
                # blocks (signed) go back with it on the next call (providers/anthropic.py)
                run.messages.append(
                    Message(
                        "assistant",
                        reply.content,
                        tuple(reply.tool_calls),
                        None,
                        None,
                        False,
                        reply.thinking,
                    )
                )
                run.best_answer = reply.content.strip() or run.best_answer
                if not reply.tool_calls or run.task.mode == "direct_chat":
                    answer = acceptance.answer(run, reply, self.verifier, self.config, self._ask)
                    async for event in answer:
                        yield event
                    continue
                # The tool calls, in order; each result is the model's next observation.
                observations, any_error, acted = [], False, False
                for index, call in enumerate(reply.tool_calls):
                    data = tool_call_data(run.steps, call)
                    if index == 0:  # the step's first call carries the usage so far (live header)
                        data["usage"], data["cost"] = run.usage_so_far(), run.cost
                    yield run.event_of("tool_call", data)
                    started, result, token = time.monotonic(), None, None
                    if tracker is not None:  # the phase's whitelist, then its shell filter
                        result, events = phase_gate.gate_call(tracker, call, run.tools)
                        if result is None:  # it runs (no event then), under the phase's filter
                            token = phase_gate.set_command_filter(tracker.shell_refusal)
                        for kind, data in events:  # answered here: advance_phase, a refusal
                            yield run.event(kind, **data)
                    try:
                        result = result or await run.interrupter.guard(
                            run.tools.safe_execute(
                                call.name, call.arguments, arguments_error=call.arguments_error
                            )
                        )
                    except Finished as stop:  # cancelled or out of time while the tool ran
                        cut = ToolResult.failure("interrupted", f"interrupted: {stop}")
                        yield run.event_of(
                            "tool_result", tool_result_data(run.steps, call, cut, started)
                        )
                        raise
                    finally:
                        if token is not None:
                            phase_gate.reset_command_filter(token)
                    yield run.event_of(
                        "tool_result", tool_result_data(run.steps, call, result, started)
                    )
                    observations.append(_observe(run, call, result))
                    any_error = any_error or not result.ok
                    acted = acted or call.name not in self.non_action_tools
                run.acted = run.acted or acted
                run.may_have_changed = run.may_have_changed or any(
                    call.name not in READ_ONLY_TOOLS for call in reply.tool_calls
                )
                action = describe_calls(reply.tool_calls) if acted else None
                seen = observations[0] if len(observations) == 1 else "\n".join(observations)
                if verdict := run.detector.record(action, seen, error=any_error):
                    async for event in acceptance.on_loop(run, verdict):
                        yield event
            except Redirect as redirect:
                run.messages.extend(redirect.messages)
            except Cut as cut:  # rambling or too slow: what arrived is its reply, and it is told
                run.cuts += 1
                _count(run, watch.partial(request))  # no usage came: estimated from the text
                if run.cuts >= MAX_CUTS:
                    raise RunawayStopped(watch.text, runaway_error(cut)) from None
                warning = runaway_error(cut, warning=True).model_dump()
                yield run.event("error", step=run.steps, fatal=False, error_struct=warning)
                run.messages += [
                    Message("assistant", watch.text),
                    Message("user", cut_message(cut)),
                ]
            except ContextWindowError:  # the server's window is smaller: compress, retry once
                if (event := await compress_after_overflow(self.compressor, run)) is None:
                    raise
                run.steps -= 1  # the same step again, on the compressed conversation
                yield event

    async def _call(self, run: RunState, request: ChatRequest) -> ChatResponse:
        """One model call whose text is not shown (a reflect call): its reply, counted."""
        run.reply, guard = None, run.interrupter.guard
        stream = self.model.stream(request, model=run.task.model)
        try:
            while run.reply is None:
                try:
                    delta = await guard(anext(stream))
                except StopAsyncIteration:
                    raise RuntimeError(_NO_RESPONSE) from None
                if delta.response is not None and not delta.restart:
                    run.reply = delta.response
        finally:
            if hasattr(stream, "aclose"):
                await stream.aclose()
        _count(run, run.reply)
        return run.reply

    async def _ask(self, run: RunState, request: ChatRequest) -> str:
        """A reflect call: one model call whose text is not streamed out, stripped."""
        if not (text := (await self._call(run, request)).content.strip()):
            raise LLMError("the reflect call returned no text")
        return text


_NO_RESPONSE = "the model stream ended without a final response"


def _count(run: RunState, reply: ChatResponse) -> None:
    """A model call's reply into the run's totals."""
    run.usage.add(reply.usage)  # in place: the run's own Usage, shared with nothing
    run.cost += reply.cost
    run.llm_calls += 1


def _observe(run: RunState, call: ToolCall, result: ToolResult) -> str:
    """A tool's result into the run: its edit (if any), its tool message; returns the text."""
    if result.ok and isinstance(diff := result.data.get("diff"), str) and diff:
        run.edits.append({"path": str(result.data.get("path", "")), "diff": diff})
    observation = result.for_model()
    # Message("tool", observation, tool_call_id=call.id, name=call.name, is_error=not result.ok),
    # positionally (a call with keywords costs more; one a step)
    run.messages.append(Message("tool", observation, (), call.id, call.name, not result.ok))
    return observation
