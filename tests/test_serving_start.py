"""What Daphne's start-up (agentkit_site/asgi.py) leaves for the serving loop, in a fresh
interpreter as Daphne runs it: the first model request and the first socket's channel layer
import nothing any more (each import ran on the loop, every socket waiting), and the start-up
heap is frozen, so a full garbage collection no longer walks it (30–90 ms with the loop still)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from tests.support import python_probe

PROBE = textwrap.dedent(
    """
    import asyncio, gc, json, sys

    import agentkit_site.asgi  # noqa: F401  (what Daphne loads)

    frozen, walked = gc.get_freeze_count(), len(gc.get_objects())
    from channels.layers import channel_layers

    layer_built = "default" in channel_layers.backends

    from apps.engine.llm import ChatRequest, Gateway, Message
    from apps.engine.llm.gateway import http_client
    from tests.engine.llm.conftest import config_for
    from tests.fakes.llm_server import FakeLLMServer

    async def first_request(server):
        config = config_for(server, {"main": "openai"})
        client = http_client(config)
        try:
            gateway = Gateway(config, http_client=client)
            request = ChatRequest(messages=(Message("user", "hello"),))
            text = []
            async for delta in gateway.stream(request):  # streamed, as a task's model call
                text.append(delta.text or "")
            return "".join(text)
        finally:
            await client.aclose()

    with FakeLLMServer() as server:
        before = set(sys.modules)
        text = asyncio.run(first_request(server))
        imported = sorted(set(sys.modules) - before)
    print(json.dumps({"frozen": frozen, "walked": walked, "layer_built": layer_built,
                      "text": text, "imported": imported}))
    """
)


def _probe(tmp_path: Path, **env: str) -> dict:
    config = tmp_path / "agentkit.yaml"
    config.write_text("executor:\n  kind: inline\n")
    run_env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    run_env.update(
        DJANGO_SETTINGS_MODULE="agentkit_site.settings",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        AGENTKIT_VAR_DIR=str(tmp_path / "var"),
        AGENTKIT_CONFIG=str(config),
        **env,
    )
    return json.loads(python_probe(PROBE, run_env).strip().splitlines()[-1])


def test_the_first_model_request_imports_nothing_on_the_serving_loop(tmp_path):
    probe = _probe(tmp_path)
    assert probe["text"]  # the request really went through the fake server
    assert probe["imported"] == []


def test_the_channel_layer_is_built_at_start_up(tmp_path):
    redis_url = os.environ.get("AGENTKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    assert _probe(tmp_path, REDIS_URL=redis_url)["layer_built"]


def test_the_start_up_heap_is_frozen_out_of_full_collections(tmp_path):
    probe = _probe(tmp_path)
    # Tens of thousands of start-up objects frozen; a full collection walks only a few left.
    assert probe["frozen"] > 50_000
    assert probe["walked"] < probe["frozen"] // 10
