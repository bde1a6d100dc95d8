"""The null run of bench/_engine_task.py (bench/engine_overhead's harness floor) makes exactly the
model calls a task of the engine makes, so that its slope is the measurement's own cost and
nothing else."""

from __future__ import annotations

import asyncio

from apps.engine.llm.gateway import Gateway
from bench import _engine_task


def conversation(request):
    return [
        (
            message.role,
            message.content,
            [(call.name, call.arguments) for call in message.tool_calls],
            message.name,
        )
        for message in request.messages
    ]


def test_the_null_run_asks_the_model_what_the_engine_asks_and_gets_the_same_answers():
    steps, cfg = 3, _engine_task.config()
    engine_gateway = Gateway.for_script(_engine_task.script(steps), config=cfg)
    asyncio.run(_engine_task.run_task(engine_gateway, cfg, steps))  # raises unless as scripted
    null_gateway = Gateway.for_script(_engine_task.script(steps), config=cfg)
    elapsed, waited, _ = asyncio.run(
        _engine_task.null_task(null_gateway, _engine_task.null_requests(steps))
    )
    engine_calls = engine_gateway.provider(cfg.llm.main).requests
    null_calls = null_gateway.provider(cfg.llm.main).requests
    assert len(null_calls) == len(engine_calls) == steps + 1
    assert [conversation(r) for r in null_calls] == [conversation(r) for r in engine_calls]
    assert 0 < waited <= elapsed
