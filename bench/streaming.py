"""Streaming under load: N sockets, each running a direct_chat task whose answer the fake LLM
server (its own process, OpenAI protocol) streams word by word at a steady pace, through a real
Daphne with the Redis channel layer and `streaming.flush_interval_ms` = 50 (the shipped value).

Measured: token events per second delivered to the sockets, and for every model chunk the time
from the fake server writing it to the client receiving the WebSocket frame that carries it
(both `time.monotonic()`, one system-wide clock). That latency includes holding the chunk for
its flush window (DeltaBatcher: up to one interval by design), so the target is p95 ≤ flush
interval + 10 ms. `flush_to_frame` is the same for the chunk that completed each frame only:
the engine's reading of the HTTP stream and everything after it; `event_to_frame` starts when
the engine created the token event (its `ts`, wall clock): runner → database → channel layer →
consumer → socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx
import websockets
import yaml

from bench._harness import percentile, report, summarize
from tests.fakes.llm_process import running_in_subprocess
from tests.load_driver import login_cookie
from tests.services import private_redis
from tests.support import agentkit_server

SOCKETS = int(os.environ.get("AGENTKIT_BENCH_SOCKETS", "50"))
FLUSH_MS = 50
WORDS = 150  # chunks per answer
TOKENS_PER_SECOND = float(
    os.environ.get("AGENTKIT_BENCH_TPS", "100")
)  # ~2 tokens a word: a chunk every ~20 ms
ANSWER = " ".join(f"w{i:03d}" for i in range(WORDS))


@dataclass
class Stream:
    index: int
    goal: str
    task_id: int | None = None
    frames: list[tuple[float, str]] = field(default_factory=list)  # (received, token text)
    event_to_frame: list[float] = field(default_factory=list)  # wall clock: event ts → frame
    status: str | None = None
    error: str | None = None


async def one_socket(ws_url: str, cookie: str, origin: str, stream: Stream) -> None:
    try:
        async with websockets.connect(
            ws_url, additional_headers={"Cookie": cookie, "Origin": origin}, max_size=2**22
        ) as socket:
            await socket.send(
                json.dumps(
                    {
                        "type": "user_message",
                        "text": stream.goal,
                        "mode": "direct_chat",
                        "client_msg_id": f"stream-{stream.index}-{time.time_ns()}",
                    }
                )
            )
            async with asyncio.timeout(90):
                async for raw in socket:
                    received, wall = time.monotonic(), time.time()
                    frame = json.loads(raw)
                    for event in frame["events"] if frame.get("type") == "batch" else [frame]:
                        if event.get("seq") is None:
                            stream.error = raw[:300]
                            return
                        stream.task_id = event["task_id"]
                        if event["type"] == "token":
                            if event["data"].get("restart"):
                                stream.error = "the stream restarted"
                                return
                            stream.frames.append((received, event["data"]["text"]))
                            created = datetime.fromisoformat(event["ts"]).timestamp()
                            stream.event_to_frame.append(wall - created)
                        elif event["type"] == "task_finished":
                            stream.status = event["data"]["status"]
                            return
    except Exception as exc:  # reported, and fails the run
        stream.error = f"{type(exc).__name__}: {exc}"


def latencies(
    chunks: list[tuple[float, str]], frames: list[tuple[float, str]]
) -> tuple[list[float], list[float]]:
    """Per chunk: its frame's arrival − its send time; per frame: arrival − send time of the
    chunk that completed it. Chunks and frames are matched by position in the concatenated
    text, which must be identical (checked by the caller)."""
    per_chunk, per_frame = [], []
    frame_ends, end = [], 0
    for _, text in frames:
        end += len(text)
        frame_ends.append(end)
    j, end = 0, 0
    for sent, text in chunks:
        end += len(text)
        while frame_ends[j] < end:
            j += 1
        per_chunk.append(frames[j][0] - sent)
        if frame_ends[j] == end:
            per_frame.append(frames[j][0] - sent)
    return per_chunk, per_frame


def _ms(values: dict) -> str:
    return f"{values['median'] * 1000:.1f} / {values['p95'] * 1000:.1f} / {values['max'] * 1000:.1f} ms"


def _summary(values: list[float]) -> dict:
    return {**summarize(values), "p95": percentile(values, 0.95), "p99": percentile(values, 0.99)}


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        script = tmp / "answer.yaml"
        script.write_text(yaml.safe_dump([{"text": ANSWER, "repeat": True}]))
        llm_url = stack.enter_context(
            running_in_subprocess(script=script, tps=TOKENS_PER_SECOND, record_chunks=True)
        )
        config = tmp / "agentkit.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "models": {
                        "main": {"provider": "openai", "model": "fake", "base_url": llm_url + "/v1"}
                    },
                    "streaming": {"flush_interval_ms": FLUSH_MS},
                }
            )
        )
        redis_url = os.environ.get("AGENTKIT_TEST_REDIS_URL") or stack.enter_context(
            private_redis(tmp)
        )
        server = stack.enter_context(
            agentkit_server(tmp, AGENTKIT_CONFIG=str(config), REDIS_URL=redis_url)
        )
        cookie = login_cookie(server.url, server.username, server.password)
        ws_url = server.url.replace("http://", "ws://") + "/ws/chat/?frames=batch"  # as the page
        streams = [Stream(i, f"stream test {i}") for i in range(SOCKETS)]

        async def drive() -> None:
            await asyncio.gather(*(one_socket(ws_url, cookie, server.url, s) for s in streams))

        asyncio.run(drive())
        chunks_by_goal: dict[str, list[tuple[float, str]]] = {}
        for key, sent, text in httpx.get(llm_url + "/_chunks", timeout=30).json()["chunks"]:
            chunks_by_goal.setdefault(key, []).append((sent, text))

    wrong, per_chunk, per_frame, frames, event_lat = [], [], [], 0, []
    first_sent, last_frame = float("inf"), 0.0
    for stream in streams:
        # The goal as a whole: "stream test 1" must not take the chunks of "stream test 10".
        goal = re.compile(rf"(?<!\w){re.escape(stream.goal)}(?!\w)")
        chunks = next((c for key, c in chunks_by_goal.items() if goal.search(key)), [])
        label = f"socket {stream.index} (task {stream.task_id})"
        if stream.error or stream.status != "completed":
            wrong.append(f"{label}: {stream.error or stream.status}")
            continue
        if "".join(t for _, t in chunks) != "".join(t for _, t in stream.frames):
            wrong.append(f"{label}: the frames' text differs from the model's")
            continue
        chunk_lat, frame_lat = latencies(chunks, stream.frames)
        per_chunk += chunk_lat
        per_frame += frame_lat
        event_lat += stream.event_to_frame
        frames += len(stream.frames)
        first_sent = min(first_sent, chunks[0][0])
        last_frame = max(last_frame, stream.frames[-1][0])
    streaming_seconds = max(last_frame - first_sent, 1e-9)
    chunk = _summary(per_chunk)
    flush = _summary(per_frame)
    event = _summary(event_lat)
    target_ms = FLUSH_MS + 10
    figures = {
        "sockets": SOCKETS,
        "flush_interval_ms": FLUSH_MS,
        "chunks_per_answer": WORDS,
        "model_tokens_per_second_per_stream": TOKENS_PER_SECOND,
        "token_events": frames,
        "streaming_seconds": round(streaming_seconds, 3),
        "token_events_per_second": round(frames / streaming_seconds, 1),
        "chunks_per_second": round(len(per_chunk) / streaming_seconds, 1),
        "chunk_to_frame_seconds": chunk,
        "flush_to_frame_seconds": flush,
        "event_to_frame_seconds": event,
        "p95_chunk_to_frame_ms": round(chunk["p95"] * 1000, 1),
        "target_p95_ms": target_ms,
        "target_met": chunk["p95"] * 1000 <= target_ms,
        "delivery_problems": wrong,
    }
    report(
        "streaming",
        figures,
        table=[
            ("sockets / flush interval", f"{SOCKETS} / {FLUSH_MS} ms"),
            ("model chunks per stream", f"{WORDS} at {TOKENS_PER_SECOND:.0f} tokens/s"),
            ("token events/s delivered", f"{frames / streaming_seconds:.0f}"),
            ("chunks/s delivered", f"{len(per_chunk) / streaming_seconds:.0f}"),
            ("chunk → frame median / p95 / max", _ms(chunk)),
            ("flush → frame median / p95 / max", _ms(flush)),
            ("event created → frame median / p95 / max", _ms(event)),
            (
                "p95 chunk → frame vs target",
                f"{chunk['p95'] * 1000:.1f} ms (target ≤ {target_ms} ms): "
                + ("met" if figures["target_met"] else "NOT met"),
            ),
            ("text delivered intact", "yes" if not wrong else f"NO: {wrong[:3]}"),
        ],
    )
    if wrong:
        raise AssertionError(f"{len(wrong)} streams went wrong, e.g. {wrong[:3]}")
    return figures


if __name__ == "__main__":
    main()
