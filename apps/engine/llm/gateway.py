"""The one door to language models: aliases from agentkit.yaml, retries, fallbacks, cost.

    gateway = Gateway(config)                       # or Gateway.for_script([...]) in tests
    response = await gateway.complete(request)      # model=None means config.llm.main
    async for delta in gateway.stream(request, model="fast"):
        ...                                         # delta.text while it arrives; the last
                                                    # delta has .response (text, tool calls,
                                                    # usage, cost, alias, model)
    await gateway.aclose()

A call goes to the alias, then to each alias of `llm.fallbacks[alias]` in turn. On one alias it
is retried (up to `llm.retries.max_attempts` calls in all) when the failure is retryable: 408,
409, 429, 5xx, connection errors, timeouts, a cut or malformed stream, and an answer with neither
text nor tool calls. The wait doubles from `initial_backoff` (with jitter), or is what the
endpoint's `retry-after` asked, never more than `max_backoff`. 400, 401, 403, 404 and other
client errors are not retried on the same alias but do move on to the fallbacks. An error
object inside a 200 answer (stream or JSON) counts as the status it stands for
(`errors.status_of_error_body`): Groq's in-stream `invalid_request_error` is a 400,
`rate_limit_exceeded` a 429. When every alias failed, the last error is raised with a note listing each attempt.

Model text leaves the gateway storable (text.py): streamed text, the answer's content, tool
calls' ids, names and arguments have NUL and lone surrogates replaced by U+FFFD, an emoji split
across two chunks joined again. Reasoning ("thinking") text is not passed on by the providers.

If a streamed call fails after some text went out and another attempt follows, the stream yields
`StreamDelta(restart=True)`: the consumer drops the text shown so far.

Cost is USD from the alias's `price` (per million tokens): uncached input at `input`, cache
reads at `cache_read`, cache writes at `cache_write`, output at `output`. A cache price left
unset in agentkit.yaml is charged at the `input` price (an over- rather than under-estimate).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx

from apps.engine.config import AgentkitConfig, ModelConfig, ModelPrice
from apps.engine.llm.cachesim import estimate_tokens
from apps.engine.llm.errors import (
    EmptyResponseError,
    LLMConfigurationError,
    LLMConnectionError,
    LLMError,
)
from apps.engine.llm.netio import AsyncioTransport
from apps.engine.llm.providers.anthropic import AnthropicProvider
from apps.engine.llm.providers.base import Provider
from apps.engine.llm.providers.openai import OpenAIProvider
from apps.engine.llm.providers.script import Script
from apps.engine.llm.providers.scripted import ScriptedProvider
from apps.engine.llm.text import StorableStream, storable, storable_call
from apps.engine.llm.types import ChatRequest, ChatResponse, StreamDelta, Usage, sorted_json

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[Any]]


def cost_of(usage: Usage, price: ModelPrice) -> float:
    """USD for `usage` at `price` (USD per million tokens)."""
    given = price.model_fields_set
    read_price = price.cache_read if "cache_read" in given else price.input
    write_price = price.cache_write if "cache_write" in given else price.input
    uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
    total = (
        uncached * price.input
        + usage.cache_read_tokens * read_price
        + usage.cache_write_tokens * write_price
        + usage.output_tokens * price.output
    )
    return total / 1_000_000


@functools.lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process, as httpx builds it by default (certifi's bundle,
    SSL_CERT_FILE / SSL_CERT_DIR honoured). Building one loads the CA bundle: 0.1-0.2 s of CPU
    that every task's client would otherwise spend on the serving event loop."""
    return httpx.create_ssl_context()


def http_client(
    config: AgentkitConfig, *, max_connections: int | None = 64, keepalive: int = 16
) -> httpx.AsyncClient:
    """An HTTP client for the model providers: the configured timeouts, the process's TLS
    context, asyncio's sockets (netio.py: no selector re-registration per read). A gateway
    opens one of its own unless it is given one to share."""
    timeout = config.llm.timeout
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=keepalive)
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout.read, connect=timeout.connect),
        limits=limits,
        verify=tls_context(),
        transport=AsyncioTransport(ssl_context=tls_context(), limits=limits),
    )


class Gateway:
    def __init__(
        self,
        config: AgentkitConfig,
        *,
        http_client: httpx.AsyncClient | None = None,
        sleep: Sleep = asyncio.sleep,
        providers: dict[str, Provider] | None = None,
    ):
        """`http_client`: share one (tests, benchmarks); otherwise the gateway opens its own on
        first use and `aclose()` closes it. `sleep`: the backoff wait (tests record it).
        `providers`: alias -> provider instances that replace what config would build."""
        self.config = config
        self._client = http_client
        self._owns_client = http_client is None
        self._sleep = sleep
        self._providers: dict[str, Provider] = dict(providers or {})

    @classmethod
    def for_script(
        cls,
        turns: str | Path | Sequence[Any] | dict[str, Any] | Script,
        *,
        config: AgentkitConfig | None = None,
        alias: str | None = None,
        chunk_delay: float = 0.0,
        **kwargs: Any,
    ) -> Gateway:
        """A gateway whose model `alias` (default: config.llm.main) plays `turns`, in process.
        `turns` is a script (see providers/scripted.py) as Python data or a YAML file path."""
        config = config or AgentkitConfig()
        alias = alias or config.llm.main
        model = config.models.get(alias)
        if model is None or model.provider != "scripted":
            model = ModelConfig(provider="scripted", price=model.price if model else ModelPrice())
        provider = ScriptedProvider(turns, alias=alias, model=model, chunk_delay=chunk_delay)
        providers = {**kwargs.pop("providers", {}), alias: provider}
        return cls(config, providers=providers, **kwargs)

    def __repr__(self) -> str:
        return f"<Gateway main={self.config.llm.main!r} aliases={sorted(self.config.models)}>"

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    # ── aliases ───────────────────────────────────────────────────────────────────────────────
    @property
    def main_alias(self) -> str:
        return self.config.llm.main

    @property
    def auxiliary_alias(self) -> str:
        """The alias for cheap side calls (summaries): llm.auxiliary_model, else main."""
        return self.config.llm.auxiliary_model or self.config.llm.main

    def chain(self, alias: str | None = None) -> list[str]:
        """The aliases one call may try, in order."""
        alias = alias or self.config.llm.main
        chain = [alias]
        for fallback in self.config.llm.fallbacks.get(alias, []):
            if fallback not in chain:
                chain.append(fallback)
        return chain

    def provider(self, alias: str) -> Provider:
        provider = self._providers.get(alias)
        if provider is not None:
            return provider
        model = self.config.models.get(alias)
        if model is None:
            known = ", ".join(sorted(self.config.models)) or "none"
            raise LLMConfigurationError(
                f"unknown model alias {alias!r} (configured: {known}); add it under `models:` "
                f"in agentkit.yaml"
            )
        if model.provider == "scripted" and model.policy:  # apps/engine/evals/policies.py
            from apps.engine.evals.policies import PolicyProvider

            provider = PolicyProvider.from_config(alias, model, self.config)
        elif model.provider == "scripted":
            provider = ScriptedProvider.from_config(alias, model, self.config)
        elif model.provider == "anthropic":
            provider = AnthropicProvider(alias, model, self.config, self._http())
        else:
            provider = OpenAIProvider(alias, model, self.config, self._http())
        self._providers[alias] = provider
        return provider

    async def context_window(self, alias: str | None = None) -> int | None:
        """The context window an OpenAI-compatible server reports for `alias` when agentkit.yaml
        sets none (`models.<alias>.context_window`): llama.cpp's `/props` (`n_ctx`), else
        Ollama's `/api/show` (`num_ctx`, else the model's `context_length`). Asked once per
        process and alias, within 3 s; None when set in the config or not reported."""
        alias = alias or self.config.llm.main
        model = self.config.models.get(alias)
        if (
            model is None
            or model.provider != "openai"
            or "context_window" in model.model_fields_set
        ):
            return None
        key = (model.base_url or "", model.model)
        if key not in _WINDOWS:
            _WINDOWS[key] = await _server_window(self._http(), model.base_url or "", model.model)
        return _WINDOWS[key]

    def cost(self, alias: str, usage: Usage) -> float:
        model = self.config.models.get(alias)
        return cost_of(usage, model.price) if model else 0.0

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = http_client(self.config)
            self._owns_client = True
        return self._client

    # ── calls ─────────────────────────────────────────────────────────────────────────────────
    async def complete(
        self, request: ChatRequest, *, model: str | None = None, fallbacks: bool = True
    ) -> ChatResponse:
        """One answer, not streamed on the wire. `fallbacks=False` tries only `model`."""
        async with aclosing(self._run(request, model, stream=False, fallbacks=fallbacks)) as run:
            async for delta in run:
                if delta.response is not None:
                    return delta.response
        raise LLMConnectionError("the call ended without an answer")  # pragma: no cover

    def stream(
        self, request: ChatRequest, *, model: str | None = None, fallbacks: bool = True
    ) -> AsyncIterator[StreamDelta]:
        """An async generator: text deltas as they arrive, then one delta whose `.response` is
        the whole answer. Closing it early (`aclose()`, or leaving `async with aclosing(...)`)
        releases the connection."""
        return self._run(request, model, stream=True, fallbacks=fallbacks)

    async def _run(
        self, request: ChatRequest, alias: str | None, *, stream: bool, fallbacks: bool
    ) -> AsyncIterator[StreamDelta]:
        chain = self.chain(alias) if fallbacks else [alias or self.config.llm.main]
        max_attempts = self.config.llm.retries.max_attempts
        failures: list[tuple[str, LLMError]] = []
        calls = 0
        for position, name in enumerate(chain):
            more_aliases = position < len(chain) - 1
            try:
                provider = self.provider(name)
            except LLMConfigurationError as exc:
                failures.append((name, exc))
                continue
            for attempt in range(1, max_attempts + 1):
                calls += 1
                emitted = False
                pieces = StorableStream()  # text a database can store (text.py)
                try:
                    async with aclosing(provider.generate(request, stream=stream)) as deltas:
                        async for delta in deltas:
                            if delta.response is None:
                                if delta.text and (text := pieces.push(delta.text)):
                                    emitted = True
                                    yield delta if text is delta.text else StreamDelta(text=text)
                                elif delta.reasoning:  # shown, never sent back: storable too
                                    emitted = True
                                    yield StreamDelta(reasoning=storable(delta.reasoning))
                                elif delta.call:  # a tool call's progress, for the wall limit
                                    emitted = True
                                    yield delta
                                continue
                            if held := pieces.end():  # a half surrogate the stream ended on
                                yield StreamDelta(text=held)
                            response = self._checked(name, provider, delta.response, calls)
                            if not response.usage.input_tokens and not response.usage.output_tokens:
                                response.usage = estimated_usage(request, response)
                                response.cost = self.cost(name, response.usage)
                            yield StreamDelta(response=response)
                            return
                    raise LLMConnectionError(f"{name}: the provider ended without an answer")
                except LLMError as exc:
                    failures.append((name, exc))
                    again = exc.retryable and attempt < max_attempts
                    if emitted and (again or more_aliases):
                        yield StreamDelta(restart=True)
                    if not again:
                        break
                    delay = self._backoff(attempt, exc)
                    log.warning(
                        "LLM call to %s failed (attempt %d of %d), retrying in %.2f s: %s",
                        name,
                        attempt,
                        max_attempts,
                        delay,
                        exc,
                    )
                    await self._sleep(delay)
            if more_aliases:
                log.warning(
                    "LLM call to %s failed, falling back to %s: %s",
                    name,
                    chain[position + 1],
                    failures[-1][1],
                )
        raise _give_up(failures)

    def _checked(
        self, alias: str, provider: Provider, response: ChatResponse, calls: int
    ) -> ChatResponse:
        response.content = storable(response.content)
        if response.reasoning:  # for display; signed thinking blocks stay as sent
            response.reasoning = storable(response.reasoning)
        if response.tool_calls:
            response.tool_calls = [storable_call(call) for call in response.tool_calls]
        if not response.content.strip() and not response.tool_calls:
            raise EmptyResponseError(
                f"{alias}: the model answered with neither text nor tool calls "
                f"(finish_reason={response.finish_reason})"
            )
        response.alias = alias
        response.model = response.model or provider.model.model
        response.cost = self.cost(alias, response.usage)
        response.attempts = calls
        return response

    def _backoff(self, attempt: int, error: LLMError) -> float:
        retries = self.config.llm.retries
        asked = getattr(error, "retry_after", None)
        if asked is not None:
            return min(float(asked), retries.max_backoff)
        wait = min(retries.max_backoff, retries.initial_backoff * 2 ** (attempt - 1))
        return wait * random.uniform(0.75, 1.0)


_WINDOWS: dict[tuple[str, str], int | None] = {}  # (base_url, model) -> what the server said


async def _server_window(client: httpx.AsyncClient, base_url: str, model: str) -> int | None:
    root = base_url.rstrip("/").removesuffix("/chat/completions").removesuffix("/v1")
    try:
        response = await client.get(f"{root}/props", timeout=3.0)
        if response.status_code == 200:
            data = response.json()
            settings = data.get("default_generation_settings") or {}
            window = settings.get("n_ctx") or data.get("n_ctx")
            if isinstance(window, int) and window > 0:
                return window
        response = await client.post(f"{root}/api/show", json={"model": model}, timeout=3.0)
        if response.status_code == 200:
            data = response.json()
            for line in str(data.get("parameters") or "").splitlines():
                name, _, value = line.partition(" ")
                if name == "num_ctx" and value.strip().isdigit():
                    return int(value.strip())
            for name, value in (data.get("model_info") or {}).items():
                if name.endswith(".context_length") and isinstance(value, int) and value > 0:
                    return value
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return None


def estimated_usage(request: ChatRequest, response: ChatResponse) -> Usage:
    """Token counts estimated from the text (about 4 characters a token) for an answer whose
    server reported none (no usage block, even with `stream_options.include_usage`): marked
    `estimated`, so a run is never shown as free and empty."""
    prompt = [block.text for block in request.system]
    for message in request.messages:
        prompt.append(message.content)
        prompt.extend(call.name + sorted_json(call.arguments) for call in message.tool_calls)
    prompt.extend(
        tool.name + tool.description + sorted_json(tool.input_schema) for tool in request.tools
    )
    answer = [response.content, response.reasoning]
    answer.extend(
        call.name + (call.raw_arguments or sorted_json(call.arguments))
        for call in response.tool_calls
    )
    return Usage(
        input_tokens=max(1, estimate_tokens("".join(prompt))),
        output_tokens=max(1, estimate_tokens("".join(answer))),
        estimated=True,
    )


def _give_up(failures: list[tuple[str, LLMError]]) -> LLMError:
    error = failures[-1][1]
    if len(failures) > 1:
        summary = ", ".join(f"{alias}: {type(exc).__name__}" for alias, exc in failures)
        error.add_note(f"LLM call failed after {len(failures)} attempts ({summary})")
    return error
