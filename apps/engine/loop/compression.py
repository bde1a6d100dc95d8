"""The loop's call site of context compression (context/compressor.py): before each model call on
the run's own context, check the running prompt size and, past the threshold, compress."""

from __future__ import annotations

from apps.engine.context.compressor import Compressor
from apps.engine.events import Event
from apps.engine.loop.state import RunState


def compression_due(compressor: Compressor | None, run: RunState) -> bool:
    """Whether the run's prompt passed the threshold: checked before each model call on the
    run's own context, without a coroutine; it only adds up what the run appended since."""
    if compressor is None:
        return False
    if (threshold := run.compress_above) is None:  # once a run: its model and compressor stay
        threshold = run.compress_above = compressor.threshold_for(run.task.model)
    return run.prompt_size.tokens(run.messages, run.system, run.specs) > threshold


async def compress_after_overflow(compressor: Compressor | None, run: RunState) -> Event | None:
    """The server refused the prompt as longer than its context window (`ContextWindowError`):
    compress now, whatever the estimate said, once a run; its `compression` event, or None when
    there is nothing to compress (or it was done already) and the error stands."""
    if compressor is None or run.overflow_compressed:
        return None
    run.overflow_compressed = True
    return await _compress(compressor, run, {"reason": "context_overflow"}, force=True)


async def compress_run(compressor: Compressor | None, run: RunState) -> Event | None:
    """The engine's call site, before a model call on the run's own context: past the
    threshold, the middle of the conversation becomes a summary; returns its `compression`
    event. Below the threshold (every step but a few) it only adds up what the run appended."""
    if compressor is None or not compression_due(compressor, run):
        return None
    return await _compress(compressor, run, {}, size=run.prompt_size)


async def _compress(compressor: Compressor, run: RunState, event_data: dict, **how) -> Event | None:
    """Compress the run's messages (`how`: force or the running size), take the summary's
    usage into the run's and return the `compression` event; None when there was nothing to
    compress."""
    done = await run.interrupter.guard(
        compressor.compress_if_needed(
            run.messages,
            system=run.system,
            tools=run.specs,
            model=run.task.model,
            goal=run.task.goal,
            **how,
        )
    )
    if done is None:
        return None
    run.messages = done.messages
    run.usage += done.usage
    run.cost += done.cost
    run.llm_calls += done.llm_calls
    return run.event("compression", step=run.steps, **event_data, **done.event_data())
