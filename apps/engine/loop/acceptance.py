"""The final-answer acceptance path of a ReActEngine step (loop/react.py): a reply without tool
calls is taken as the final answer once it is a complete one — not a truncated or empty reply
(reflexion.not_an_answer), not prose while the work is undone (a react run's one tool nudge), not
an answer that says it is unfinished (plan_exec, once) — and verified (verification_gate.py:
verify, re-inject, reflect, give up), then submitted. The loop detector's verdicts are answered
here too. Control flow is loop/flow.py's: `Redirect` takes another step, `Finished` ends the
attempt; both propagate to the engine's step loop and run().
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from apps.engine.config import AgentkitConfig
from apps.engine.events import Event
from apps.engine.failure import structs
from apps.engine.llm.types import ChatRequest, ChatResponse, Message
from apps.engine.loop.detection import LoopVerdict
from apps.engine.loop.flow import LoopStopped, Redirect
from apps.engine.loop.state import RunState
from apps.engine.loop.textcalls import nudge_text, undone_work
from apps.engine.plan import reflexion, verification_gate
from apps.engine.ports import Verifier

Ask = Callable[[RunState, ChatRequest], Awaitable[str]]  # a reflect call (ReActEngine._ask)


async def answer(
    run: RunState, reply: ChatResponse, verifier: Verifier | None, config: AgentkitConfig, ask: Ask
) -> AsyncIterator[Event]:
    """A reply without tool calls: the final answer, once it is a complete one and verified."""
    if run.task.mode != "direct_chat" and (problem := reflexion.not_an_answer(reply)):
        if verdict := run.detector.record(None):
            async for event in on_loop(run, verdict, prefix=problem):
                yield event
        raise Redirect(Message("user", problem))
    if (
        run.nudge_prose
        and not run.tool_nudged
        and not run.acted
        and run.task.mode == "react"
        and undone_work(run.task.goal, reply.content, run.specs)
    ):  # prose while the work is undone: once, what tools exist and how to call them
        run.tool_nudged = True
        raise Redirect(Message("user", nudge_text(run.specs)))
    reason = run.tracker is not None and not run.nudged and reflexion.unfinished(reply.content)
    if reason:  # plan_exec: an answer that says it is unfinished goes back once (R10)
        run.nudged = True
        raise Redirect(reflexion.finish_request(reason))
    async for event in finish(run, reply.content, verifier, config, ask):
        yield event


async def finish(
    run: RunState, answer: str, verifier: Verifier | None, config: AgentkitConfig, ask: Ask
) -> AsyncIterator[Event]:
    """The final-answer gate (verification_gate.py): verified, then submitted. A react run
    that changed a coding workspace verifies by default (verification.react_when_changed)."""
    if (
        not run.verify
        and run.task.mode == "react"
        and run.edits  # an edit made: a command that may have changed files is unverified
        and config.verification.react_when_changed
        and getattr(verifier, "coding_workspace", False)
    ):
        run.verify = run.verify_implicit = True
    async for event in verification_gate.finish(run, answer, verifier, config, ask):
        yield event


async def on_loop(run: RunState, verdict: LoopVerdict, *, prefix: str = "") -> AsyncIterator[Event]:
    """The loop detector's verdict on a step (run.detector.record): first detection: warn
    the model (one recovery message); if it goes on: stop."""
    if verdict.fatal:
        raise LoopStopped(error=structs.loop_detected(verdict))
    warning = structs.loop_suspected(verdict)
    yield run.event("error", step=run.steps, fatal=False, error_struct=warning.model_dump())
    raise Redirect(Message("user", f"{prefix}\n\n{verdict.message}".strip()))
