"""bench/engine_overhead.py's null run (the harness floor) makes exactly the model calls a task of
the engine makes, so that its slope is the measurement's own cost and nothing else."""

from __future__ import annotations

import asyncio

from apps.engine.llm.gateway import Gateway
from bench import engine_overhead


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
    steps, cfg = 3, engine_overhead.config()
    engine_gateway = Gateway.for_script(engine_overhead.script(steps), config=cfg)
    asyncio.run(engine_overhead.run_task(engine_gateway, cfg, steps))  # raises unless as scripted
    null_gateway = Gateway.for_script(engine_overhead.script(steps), config=cfg)
    elapsed, waited, _ = asyncio.run(
        engine_overhead.null_task(null_gateway, engine_overhead.null_requests(steps))
    )
    engine_calls = engine_gateway.provider(cfg.llm.main).requests
    null_calls = null_gateway.provider(cfg.llm.main).requests
    assert len(null_calls) == len(engine_calls) == steps + 1
    assert [conversation(r) for r in null_calls] == [conversation(r) for r in engine_calls]
    assert 0 < waited <= elapsed
