"""A review reply given to another Daphne process resumes the task where it runs: two Daphne
processes share the database and the Redis channel layer; the task runs on an RQ worker; the
spec_review_reply goes to the second Daphne, and both sockets see the run complete."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from tests.load_driver import login_cookie
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.slow
GOAL = "@plan fix the failing test in tests/test_slug.py"


def cross_process_config(tmp) -> str:
    shipped = (ROOT / "agentkit.yaml").read_text()
    config = tmp / "agentkit.yaml"
    text = shipped.replace("  kind: inline ", "  kind: rq ").replace(
        "  poll_interval_ms: 500 ", "  poll_interval_ms: 100 "
    )
    assert "kind: rq" in text and "poll_interval_ms: 100" in text
    config.write_text(text)
    return str(config)


async def connect(server, cookie):
    return await websockets.connect(
        server.url.replace("http", "ws") + "/ws/chat/",
        additional_headers={"Cookie": cookie, "Origin": server.url},
        max_size=2**22,
    )


async def frames_until(socket, predicate, timeout=120):
    seen = []
    async with asyncio.timeout(timeout):
        while True:
            frame = json.loads(await socket.recv())
            seen.append(frame)
            if predicate(frame):
                return seen


async def confirm_on_the_other_process(a, b, cookie_a, cookie_b):
    runner_side = await connect(a, cookie_a)
    await runner_side.send(
        json.dumps({"type": "user_message", "text": GOAL, "client_msg_id": "x1"})
    )
    before = await frames_until(runner_side, lambda f: f["type"] == "spec_review_request")
    request = before[-1]
    assert request["data"]["spec_review_id"] == f"{request['data']['spec_id']}:spec_review"

    other = await connect(b, cookie_b)
    await other.send(json.dumps({"type": "resume", "task_id": request["task_id"], "after_seq": 0}))
    await other.send(
        json.dumps(
            {
                "type": "spec_review_reply",
                "spec_review_id": request["data"]["spec_review_id"],
                "decision": "confirm",
            }
        )
    )
    finished = lambda f: f["type"] == "task_finished"  # noqa: E731
    on_b = await frames_until(other, finished)
    on_a = before + await frames_until(runner_side, finished)
    await runner_side.close()
    await other.close()
    return request["task_id"], on_a, on_b


def test_a_reply_to_a_second_daphne_resumes_the_task_running_on_the_worker(tmp_path, redis_url):
    config = cross_process_config(tmp_path)
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    with (
        agentkit_server(a_dir, worker=True, AGENTKIT_CONFIG=config, REDIS_URL=redis_url) as a,
        agentkit_server(
            b_dir,
            AGENTKIT_CONFIG=config,
            REDIS_URL=redis_url,
            DATABASE_URL=a.env["DATABASE_URL"],
            AGENTKIT_VAR_DIR=a.env["AGENTKIT_VAR_DIR"],
        ) as b,
    ):
        cookie_a = login_cookie(a.url, a.username, a.password)
        cookie_b = login_cookie(b.url, b.username, b.password)
        task_id, on_a, on_b = asyncio.run(confirm_on_the_other_process(a, b, cookie_a, cookie_b))
        worker_log = (a_dir / "worker.log").read_text()

    assert f"task-{task_id}" in worker_log, "the task did not run on the RQ worker"
    for frames in (on_a, on_b):
        resolved = [f["data"] for f in frames if f["type"] == "spec_review_resolved"]
        assert [r["decision"] for r in resolved] == ["confirmed"]
        assert frames[-1]["data"]["status"] == "completed"
        seqs = [f["seq"] for f in frames if f["type"] != "error" or f["seq"] is not None]
        assert seqs == list(range(1, len(seqs) + 1))
