"""Chat under load: N concurrent sockets, each running a scripted react task (a tool call and a
streamed answer) on a real Daphne with the Redis channel layer, as `make run` starts it.
Reports delivery correctness (exactly once, in order) and throughput / latency figures. The
first event is timed from opening the socket (all 50 open at once: handshake and session
authentication included) and, separately, from sending the message on the open socket."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from pathlib import Path

import httpx

from bench._harness import report, summarize
from tests.load_driver import drive, login_cookie, problems, write_load_config
from tests.services import private_redis
from tests.support import agentkit_server

SOCKETS = int(os.environ.get("AGENTKIT_BENCH_SOCKETS", "50"))


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp_name, contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        redis_url = os.environ.get("AGENTKIT_TEST_REDIS_URL") or stack.enter_context(
            private_redis(tmp)
        )
        config = write_load_config(tmp)
        server = stack.enter_context(
            agentkit_server(tmp, AGENTKIT_CONFIG=str(config), REDIS_URL=redis_url)
        )
        cookie = login_cookie(server.url, server.username, server.password)
        started = time.monotonic()
        runs = asyncio.run(drive(server.url, cookie, SOCKETS))
        wall = time.monotonic() - started
        with httpx.Client(base_url=server.url, headers={"Cookie": cookie}, timeout=30) as client:
            stored = {
                r.task_id: [
                    e["seq"]
                    for e in client.get(f"/api/tasks/{r.task_id}/events?after=0").json()["events"]
                ]
                for r in runs
                if r.task_id
            }
    wrong = problems(runs, stored)
    events = sum(len(r.seqs) for r in runs)
    first = summarize([r.first_event_s for r in runs if r.first_event_s is not None])
    connect = summarize([r.connected_s for r in runs if r.connected_s is not None])
    after_message = summarize(
        [r.message_to_first_event_s for r in runs if r.message_to_first_event_s is not None]
    )
    total = summarize([r.total_s for r in runs if r.total_s is not None])
    figures = {
        "sockets": SOCKETS,
        "events_delivered": events,
        "events_per_task_median": summarize([len(r.seqs) for r in runs])["median"],
        "wall_seconds": round(wall, 3),
        "events_per_second": round(events / wall, 1),
        "first_event_seconds": first,  # from opening the socket (handshake included)
        "connect_seconds": connect,  # the handshake and authentication alone
        "message_to_first_event_seconds": after_message,  # from sending the message
        "task_seconds": total,
        "delivery_problems": wrong,
        "all_delivered_once_in_order": not wrong,
    }
    report(
        "chat_load",
        figures,
        table=[
            ("sockets / tasks", str(SOCKETS)),
            ("events delivered", str(events)),
            ("wall time", f"{wall:.2f} s"),
            ("events/s delivered", f"{events / wall:.0f}"),
            (
                "first event median / p90 (from opening)",
                f"{first['median'] * 1000:.0f} / {first['p90'] * 1000:.0f} ms",
            ),
            (
                "  socket open median / p90",
                f"{connect['median'] * 1000:.0f} / {connect['p90'] * 1000:.0f} ms",
            ),
            (
                "  message → first event median / p90",
                f"{after_message['median'] * 1000:.0f} / {after_message['p90'] * 1000:.0f} ms",
            ),
            ("task end median / p90", f"{total['median']:.2f} / {total['p90']:.2f} s"),
            ("exactly once, in order", "yes" if not wrong else f"NO: {wrong[:3]}"),
        ],
    )
    if wrong:
        raise AssertionError(f"{len(wrong)} delivery problems, e.g. {wrong[:3]}")
    return figures


if __name__ == "__main__":
    main()
