"""LLM gateway: overhead per streamed call, and SSE chunks parsed per second.

1. Overhead. The fake LLM server runs in its own process with zero latency (no time to first
   token, no token rate) and answers every call with the same ~200-piece reply. For each
   protocol, calls alternate between a bare httpx stream that only reads the bytes (the floor:
   HTTP + the server) and `Gateway.stream()` (decode, accumulate, deltas, usage, cost). The
   overhead of a call is the gateway time minus the paired bare time, in wall-clock time and in
   the client process's CPU time (steadier: the server's work and scheduling noise drop out).
   An in-process scripted call is timed too, for reference.
2. Parsing. A recorded stream of each protocol (built by the fake server's wire module) goes
   through `SSEDecoder` + the provider's `accumulate`, fed in 4 KiB network-sized pieces.
3. Long lines. One `data:` line of 25, 50, 100, 200 and 400 KB fed to `SSEDecoder` in 48-byte
   pieces (a slow server streaming one big JSON chunk). The decoder is linear when the time per
   KB stays flat: `linearity` is the time per KB of the longest line over that of the shortest
   (about 1 when linear; a quadratic decoder gives about 16 for 25 → 400 KB).

Run: `.venv/bin/python -m bench llm_gateway` (writes bench/results/llm_gateway.json).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from apps.engine.config import parse_config
from apps.engine.llm import ChatRequest, Gateway, Message
from apps.engine.llm.providers import anthropic, openai
from apps.engine.llm.sse import SSEDecoder, StreamSnapshot
from bench._harness import report, summarize
from tests.fakes import llm_wire
from tests.fakes.llm_process import running_in_subprocess
from tests.fakes.llm_wire_anthropic import anthropic_events
from tests.fakes.llm_wire_openai import openai_events

WORDS = 200
REPLY = " ".join(f"word{i}" for i in range(WORDS))
CALLS = 150
WARMUP = 10
PARSE_CHUNKS = 5000
PARSE_ROUNDS = 15
LONG_LINE_KB = (25, 50, 100, 200, 400)
LONG_LINE_PIECE = 48
LONG_LINE_ROUNDS = 7


def request() -> ChatRequest:
    return ChatRequest(messages=(Message("user", "Say two hundred words."),), max_tokens=1024)


async def bare_stream(client: httpx.AsyncClient, url: str, body: dict, headers: dict):
    """(wall seconds, client CPU seconds) of a POST whose streamed body is only read."""
    wall, cpu = time.perf_counter(), time.process_time()
    async with client.stream("POST", url, json=body, headers=headers) as response:
        async for _ in response.aiter_bytes():
            pass
    return time.perf_counter() - wall, time.process_time() - cpu


async def gateway_stream(gateway: Gateway, alias: str):
    """(wall seconds, client CPU seconds, text deltas) of one Gateway.stream call."""
    wall, cpu = time.perf_counter(), time.process_time()
    pieces = 0
    async for delta in gateway.stream(request(), model=alias):
        pieces += 1
        if delta.response is not None:
            assert delta.response.content == REPLY, "the gateway returned a different answer"
    return time.perf_counter() - wall, time.process_time() - cpu, pieces - 1


async def measure_overhead(base_url: str) -> dict:
    config = parse_config(
        {
            "models": {
                "openai": {"provider": "openai", "model": "bench", "base_url": f"{base_url}/v1"},
                "anthropic": {"provider": "anthropic", "model": "bench", "base_url": base_url},
                "scripted": {"provider": "scripted"},
            },
            "llm": {"main": "openai", "retries": {"max_attempts": 1}},
        }
    )
    figures: dict = {}
    limits = httpx.Limits(max_keepalive_connections=4)
    async with httpx.AsyncClient(limits=limits) as client:
        gateway = Gateway(config, http_client=client)
        for alias in ("openai", "anthropic"):
            provider = gateway.provider(alias)
            body = provider.build_body(request(), stream=True)
            headers = provider._headers(None)
            url = provider.endpoint
            bare, through, overhead, cpu_overhead = [], [], [], []
            pieces = 0
            for index in range(WARMUP + CALLS):
                floor, floor_cpu = await bare_stream(client, url, body, headers)
                total, total_cpu, pieces = await gateway_stream(gateway, alias)
                if index >= WARMUP:
                    bare.append(floor * 1000)
                    through.append(total * 1000)
                    overhead.append((total - floor) * 1000)
                    cpu_overhead.append((total_cpu - floor_cpu) * 1000)
            figures[alias] = {
                "bare_ms": summarize(bare),
                "gateway_ms": summarize(through),
                "overhead_ms": summarize(overhead),
                "overhead_client_cpu_ms": summarize(cpu_overhead),
                "text_deltas_per_call": pieces,
                "overhead_us_per_delta": statistics.median(cpu_overhead) * 1000 / pieces,
            }
        scripted = Gateway.for_script([{"text": REPLY, "repeat": True}])
        times = []
        for index in range(WARMUP + CALLS):
            started = time.perf_counter()
            async for _ in scripted.stream(request()):
                pass
            if index >= WARMUP:
                times.append((time.perf_counter() - started) * 1000)
        figures["scripted_in_process_ms"] = summarize(times)
    return figures


def recorded_stream(protocol: str) -> bytes:
    answer = llm_wire.Answer(
        text=" ".join(f"token{i}" for i in range(PARSE_CHUNKS)), input_tokens=100, output_tokens=1
    )
    body = {"model": "bench", "stream_options": {"include_usage": True}}
    events = (
        openai_events(body, answer, 1)
        if protocol == "openai"
        else anthropic_events(body, answer, 1)
    )
    return "".join(frame for frame, _ in events).encode()


def measure_parsing() -> dict:
    figures = {}
    for protocol, module in (("openai", openai), ("anthropic", anthropic)):
        data = recorded_stream(protocol)
        pieces = [data[i : i + 4096] for i in range(0, len(data), 4096)]
        rates, events = [], 0
        for _ in range(PARSE_ROUNDS):
            started = time.perf_counter()
            decoder, snapshot = SSEDecoder(), StreamSnapshot()
            events = 0
            for piece in pieces:
                for event in decoder.feed(piece):
                    module.accumulate(event, snapshot)
                    events += 1
            response = snapshot.finish()
            elapsed = time.perf_counter() - started
            assert len(response.content.split()) == PARSE_CHUNKS
            rates.append(events / elapsed)
        figures[protocol] = {
            "events_per_stream": events,
            "bytes_per_stream": len(data),
            "chunks_per_second": statistics.median(rates),
            "chunks_per_second_best": max(rates),  # least disturbed by other processes
            "megabytes_per_second": statistics.median(rates) * len(data) / events / 1e6,
        }
    return figures


def measure_long_lines() -> dict:
    sizes = {}
    for kb in LONG_LINE_KB:
        payload = "x" * (kb * 1000)
        data = f"data: {payload}\n\n".encode()
        pieces = [data[i : i + LONG_LINE_PIECE] for i in range(0, len(data), LONG_LINE_PIECE)]
        times = []
        for _ in range(LONG_LINE_ROUNDS):
            decoder = SSEDecoder()
            started = time.perf_counter()
            events = [event for piece in pieces for event in decoder.feed(piece)]
            times.append((time.perf_counter() - started) * 1000)
            assert len(events) == 1 and len(events[0].data) == len(payload)
        best = min(times)
        sizes[f"{kb}_kb"] = {
            "median_ms": statistics.median(times),
            "best_ms": best,
            "best_us_per_kb": best * 1000 / kb,
        }
    first, last = sizes[f"{LONG_LINE_KB[0]}_kb"], sizes[f"{LONG_LINE_KB[-1]}_kb"]
    return {
        "piece_bytes": LONG_LINE_PIECE,
        "sizes": sizes,
        "linearity": last["best_us_per_kb"] / first["best_us_per_kb"],
    }


def main() -> dict:
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "bench.yaml"
        script.write_text(yaml.safe_dump([{"text": REPLY, "repeat": True}]))
        with running_in_subprocess(script=script) as base_url:
            overhead = asyncio.run(measure_overhead(base_url))
    parsing = measure_parsing()
    long_lines = measure_long_lines()
    figures = {
        "calls": CALLS,
        "reply_words": WORDS,
        "overhead": overhead,
        "parsing": parsing,
        "long_lines": long_lines,
    }
    rows = []
    for alias in ("openai", "anthropic"):
        o = overhead[alias]
        rows += [
            (f"{alias}: bare httpx stream, median / p90", _ms(o["bare_ms"])),
            (f"{alias}: Gateway.stream, median / p90", _ms(o["gateway_ms"])),
            (f"{alias}: overhead, wall, median / p90", _ms(o["overhead_ms"])),
            (f"{alias}: overhead, client CPU, median / p90", _ms(o["overhead_client_cpu_ms"])),
            (
                f"{alias}: CPU overhead per text delta",
                f"{o['overhead_us_per_delta']:.1f} µs ({o['text_deltas_per_call']} deltas/call)",
            ),
        ]
    rows.append(("scripted, in process, median / p90", _ms(overhead["scripted_in_process_ms"])))
    for protocol in ("openai", "anthropic"):
        p = parsing[protocol]
        rows.append(
            (
                f"{protocol}: SSE decode + accumulate",
                f"{p['chunks_per_second']:,.0f} chunks/s median, "
                f"{p['chunks_per_second_best']:,.0f} best ({p['megabytes_per_second']:.1f} MB/s)",
            )
        )
    rows.append(
        (
            f"one long data: line in {LONG_LINE_PIECE}-byte pieces, best",
            ", ".join(
                f"{kb} KB {long_lines['sizes'][f'{kb}_kb']['best_ms']:.1f} ms"
                for kb in LONG_LINE_KB
            )
            + f"; µs/KB {LONG_LINE_KB[-1]} KB ÷ {LONG_LINE_KB[0]} KB = "
            f"{long_lines['linearity']:.2f} (1 = linear)",
        )
    )
    report("llm_gateway", json.loads(json.dumps(figures)), table=rows)
    return figures


def _ms(summary: dict) -> str:
    return f"{summary['median']:.2f} ms / {summary['p90']:.2f} ms"


if __name__ == "__main__":
    main()
