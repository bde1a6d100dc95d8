"""Drive N concurrent chat sockets through scripted tasks against a real server, and check that
every event of every task arrives exactly once, in order, with contiguous seq.

Used by tests/tasks/test_chat_load.py (correctness) and bench/chat_load.py (figures)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import websockets

LOAD_SCRIPT = """\
# Each task: think (a tool call), then a long streamed answer.
- match: '(?i)load'
  role: user
  repeat: true
  text: "Thinking about it first."
  tool_calls: [{name: think, arguments: {thought: "plan the answer"}}]
- after_tool: think
  repeat: true
  text: >-
    Here is a long answer so that the stream has many chunks to deliver in order to every
    socket, word by word, without losing or repeating a single one of them on the way through
    the runner, the database, the channel layer and the consumer to the browser.
"""


def write_load_config(tmp: Path, *, chunk_delay_ms: float = 0, flush_ms: int = 0) -> Path:
    script = tmp / "load-script.yaml"
    script.write_text(LOAD_SCRIPT)
    config = tmp / "agentkit.yaml"
    config.write_text(
        f"models: {{main: {{provider: scripted, script: {script}, chunk_delay_ms: {chunk_delay_ms}}}}}\n"
        f"streaming: {{flush_interval_ms: {flush_ms}}}\n"
    )
    return config


def login_cookie(base_url: str, username: str, password: str) -> str:
    with httpx.Client(base_url=base_url, follow_redirects=False, timeout=10) as client:
        page = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        response = client.post(
            "/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={"Referer": f"{base_url}/accounts/login/"},
        )
        assert response.status_code == 302, response.text[:300]
        return "; ".join(f"{k}={v}" for k, v in client.cookies.items())


@dataclass
class SocketRun:
    index: int
    task_id: int | None = None
    seqs: list[int] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    status: str | None = None
    first_event_s: float | None = None  # from opening the socket
    connected_s: float | None = None  # the socket open (handshake + authentication)
    message_to_first_event_s: float | None = None  # from sending the message, socket open
    total_s: float | None = None
    error: str | None = None


async def one_socket(
    ws_url: str, cookie: str, origin: str, index: int, timeout: float
) -> SocketRun:
    run = SocketRun(index)
    started = time.monotonic()
    try:
        async with websockets.connect(
            ws_url, additional_headers={"Cookie": cookie, "Origin": origin}, max_size=2**22
        ) as socket:
            run.connected_s = time.monotonic() - started
            await socket.send(
                json.dumps(
                    {
                        "type": "user_message",
                        "text": f"load test {index}",
                        "mode": "react",
                        "client_msg_id": f"load-{index}-{time.time_ns()}",
                    }
                )
            )
            async with asyncio.timeout(timeout):
                async for raw in socket:
                    if _take(run, json.loads(raw), started):
                        break
    except Exception as exc:  # reported, and fails the check
        run.error = f"{type(exc).__name__}: {exc}"
    run.total_s = time.monotonic() - started
    return run


def _take(run: SocketRun, frame: dict, started: float) -> bool:
    """Record a frame's events (a batch frame holds several); True when the task is over."""
    for event in frame["events"] if frame.get("type") == "batch" else [frame]:
        if event.get("seq") is None:
            run.error = json.dumps(event)
            return True
        if run.first_event_s is None:
            run.first_event_s = time.monotonic() - started
            run.message_to_first_event_s = run.first_event_s - run.connected_s
        run.task_id = event["task_id"]
        run.seqs.append(event["seq"])
        run.types.append(event["type"])
        if event["type"] == "task_finished":
            run.status = event["data"]["status"]
            return True
    return False


async def drive(
    base_url: str, cookie: str, sockets: int, *, timeout: float = 120, batch: bool = True
) -> list[SocketRun]:
    """`batch`: open the sockets as the chat page does (/ws/chat/?frames=batch)."""
    ws_url = base_url.replace("http://", "ws://") + "/ws/chat/" + ("?frames=batch" if batch else "")
    return await asyncio.gather(
        *(one_socket(ws_url, cookie, base_url, i, timeout) for i in range(sockets))
    )


def problems(runs: list[SocketRun], stored: dict[int, list[int]]) -> list[str]:
    """Everything wrong with a load run; empty when every event arrived exactly once in order."""
    found = []
    task_ids = [r.task_id for r in runs]
    if len(set(task_ids)) != len(runs):
        found.append(f"sockets did not each get their own task: {task_ids}")
    for run in runs:
        label = f"socket {run.index} (task {run.task_id})"
        if run.error:
            found.append(f"{label}: {run.error}")
            continue
        if run.status != "completed":
            found.append(f"{label}: finished {run.status}")
        if run.seqs != list(range(1, len(run.seqs) + 1)):
            found.append(f"{label}: seqs not contiguous/ordered: {run.seqs}")
        if run.task_id in stored and stored[run.task_id] != run.seqs:
            found.append(
                f"{label}: got {len(run.seqs)} events, database has {len(stored[run.task_id])}"
            )
    return found
