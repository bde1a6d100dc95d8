"""`models.<alias>.context_window` left unset: read from the server (llama.cpp's /props), and
compression sized by it."""

from __future__ import annotations

from apps.engine.config import parse_config
from apps.engine.llm.gateway import Gateway
from apps.engine.loop import setup as run_setup
from apps.engine.loop.react import ReActEngine
from apps.engine.loop.state import RunState
from apps.engine.task import AgentTask
from tests.realmodel import llama


def config(server: llama.LlamaServer, **model):
    entry = {"provider": "openai", "model": llama.MODEL_NAME, "base_url": server.base_url}
    return parse_config({"models": {"local": {**entry, **model}}, "llm": {"main": "local"}})


async def test_the_window_is_read_from_the_server_and_sizes_compression(llama_server):
    cfg = config(llama_server)
    async with Gateway(cfg) as gateway:
        assert await gateway.context_window("local") == llama_server.n_ctx
        engine = ReActEngine(gateway, None, cfg)
        run = RunState(AgentTask(1, "hello", mode="react"))
        run_setup.prepare(engine, run, None)
        await run_setup.learn_window(engine, run)
        assert run.compress_above == llama_server.n_ctx // 2  # not half of 128k
        run.cleanups[0]()


async def test_a_window_set_in_the_config_is_not_asked_for(llama_server):
    async with Gateway(config(llama_server, context_window=1000)) as gateway:
        assert await gateway.context_window("local") is None
