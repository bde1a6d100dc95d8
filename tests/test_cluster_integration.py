"""The cluster under load with processes dying (issue 29 acceptance): `make cluster` with real
PostgreSQL and Redis, 2 web processes and 3 agent workers. 60 tasks: 30 by the JSON API and 30
by WebSocket, half through each web process. A worker is SIGKILLed while it runs a task, and a
web process is SIGKILLed while its sockets stream. Every task ends exactly once, `completed` (the
killed worker's react task taken over by another worker's reaper and resumed from its stored
events, with a `task_resumed` that says why),
every task's stored events are contiguous with one `task_finished`, last; every socket whose web
process died reconnects to the other one and receives every event of its task exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import time

import httpx
import psycopg
import pytest
import websockets

from tests.load_driver import login_cookie
from tests.services import postgres_bin_dir
from tests.support import free_port
from tests.test_make_cluster import MakeCluster, processes_with_marker

pytestmark = pytest.mark.slow

TASKS = 60
CONFIG = """
models:
  main: {provider: scripted, model: scripted-demo, chunk_delay_ms: 15}
evolution: {enabled: false}
executor: {orphan_after_seconds: 6}
"""
# The tasks go in turn to copies of the demo workspace, as a team's service runs many: a workspace
# takes one writer at a time (the workspace lease), so on one workspace the 3 workers would run
# the 60 tasks one after the other. Each copy still gets 10 tasks that wait for each other.
WORKSPACES = 6
MAKE_WORKSPACES = f"""
from pathlib import Path
from django.contrib.auth import get_user_model
from apps.tasks.models import Workspace
from apps.tasks.services import install_demo_project, workspace_create
demo = Path(Workspace.objects.get(name="demo").root_dir)
admin = get_user_model().objects.get(username="admin")
for i in range({WORKSPACES}):
    target = demo.parent / f"it-{{i}}"
    install_demo_project(demo, target)
    workspace_create(name=target.name, root_dir=target, members=[admin])
"""


@pytest.fixture
def cluster(tmp_path):
    if postgres_bin_dir() is None:
        pytest.fail("make cluster needs PostgreSQL's server binaries: apt-get install postgresql")
    started = MakeCluster(tmp_path, free_port(), workers=3, config=CONFIG)
    yield started
    print(f"make cluster (exit {started.proc.poll()}):\n{started.output()[-20000:]}")
    for line in processes_with_marker(started.marker):
        os.kill(int(line.split(":")[0]), signal.SIGKILL)
    shutil.rmtree(started.var, ignore_errors=True)


class Socket:
    """One chat socket's task: reconnects to the other web process when its own dies."""

    def __init__(self, index: int, port: int, other: int, cookie: str):
        self.index, self.port, self.other, self.cookie = index, port, other, cookie
        self.msg_id = f"it-{index}-{time.time_ns()}"
        self.task_id: int | None = None
        self.frames: list[dict] = []
        self.reconnects = 0

    def done(self) -> bool:
        return bool(self.frames) and self.frames[-1]["type"] == "task_finished"

    async def run(self) -> None:
        port = self.port
        while not self.done():
            headers = {"Cookie": self.cookie, "Origin": f"http://127.0.0.1:{port}"}
            try:
                async with websockets.connect(
                    f"ws://127.0.0.1:{port}/ws/chat/", additional_headers=headers
                ) as socket:
                    if self.task_id is None:  # a re-sent message id follows the same task
                        first = {"type": "user_message", "text": "hello there"}
                        first["workspace"] = f"it-{self.index % WORKSPACES}"
                        await socket.send(json.dumps({**first, "client_msg_id": self.msg_id}))
                    else:
                        last = self.frames[-1]["seq"]
                        resume = {"type": "resume", "task_id": self.task_id, "after_seq": last}
                        await socket.send(json.dumps(resume))
                    async for raw in socket:
                        frame = json.loads(raw)
                        if "seq" not in frame or frame["seq"] is None:
                            continue
                        if self.task_id is None:
                            self.task_id = frame["task_id"]
                        if frame["task_id"] == self.task_id:
                            self.frames.append(frame)
                        if self.done():
                            return
            except (OSError, websockets.ConnectionClosed, websockets.InvalidStatus):
                pass
            self.reconnects += 1
            port = self.other if port == self.port else self.port
            await asyncio.sleep(0.2)


async def _drive(cluster: MakeCluster, token: str, cookie: str) -> tuple[list[int], list[Socket]]:
    first, second = cluster.port, cluster.port + 1
    auth = {"Authorization": f"Bearer {token}"}
    sockets = [
        Socket(i, first if i % 2 == 0 else second, second if i % 2 == 0 else first, cookie)
        for i in range(TASKS // 2)
    ]
    running = [asyncio.ensure_future(s.run()) for s in sockets]
    api_ids = []
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(TASKS // 2):
            port = first if i % 2 == 0 else second
            created = await client.post(
                f"http://127.0.0.1:{port}/api/tasks",
                json={"workspace": f"it-{i % WORKSPACES}", "text": f"hello there {i}"},
                headers=auth,
            )
            assert created.status_code == 201, created.text
            api_ids.append(created.json()["id"])

    # A worker dies mid-task: the one running the first task we find running.
    db_url = cluster.env_value("DATABASE_URL")
    victim_task = None
    async with asyncio.timeout(120):
        while victim_task is None:
            with psycopg.connect(db_url, autocommit=True) as db:
                rows = db.execute(
                    "select id, run_owner from tasks_task where status='running' and run_owner<>''"
                ).fetchall()
            workers = cluster.worker_pids()
            for task_id, owner in rows:
                pid = int(owner.split(":")[1])
                if pid in workers:
                    os.kill(pid, signal.SIGKILL)
                    victim_task = task_id
                    break
            await asyncio.sleep(0.1)

    # A web process dies while its sockets stream: once some of them are under way.
    async with asyncio.timeout(120):
        while not any(s.frames and not s.done() for s in sockets if s.port == first):
            await asyncio.sleep(0.05)
    os.kill(cluster.web_pid(first), signal.SIGKILL)

    async with asyncio.timeout(300):
        await asyncio.gather(*running)
    return [victim_task, *api_ids], sockets


def test_sixty_tasks_survive_a_dead_worker_and_a_dead_web_process(cluster):
    cluster.wait_healthy(cluster.port, timeout=600)
    cluster.wait_healthy(cluster.port + 1, timeout=60)
    made = cluster.manage("create_api_token", "admin")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    copies = cluster.manage("shell", "-c", shlex.quote(MAKE_WORKSPACES))
    assert copies.returncode == 0, copies.stderr
    cookie = login_cookie(f"http://127.0.0.1:{cluster.port}", "admin", "correct-horse-battery")

    (victim, *api_ids), sockets = asyncio.run(_drive(cluster, token, cookie))

    db_url = cluster.env_value("DATABASE_URL")
    deadline = time.monotonic() + 120
    while True:
        with psycopg.connect(db_url, autocommit=True) as db:
            tasks = db.execute("select id, status, error from tasks_task order by id").fetchall()
        if all(status not in {"queued", "running"} for _, status, _ in tasks):
            break
        assert time.monotonic() < deadline, [t for t in tasks if t[1] in {"queued", "running"}]
        time.sleep(0.5)
    socket_ids = [s.task_id for s in sockets]
    assert len(set(socket_ids)) == TASKS // 2 and None not in socket_ids
    assert sorted(t for t, _, _ in tasks) == sorted(api_ids + socket_ids)  # one task each

    with psycopg.connect(db_url, autocommit=True) as db:
        for task_id, status, error in tasks:
            assert status == "completed", (task_id, task_id == victim, status, error)
            events = db.execute(
                "select seq, type, data from tasks_taskevent where task_id=%s order by seq",
                (task_id,),
            ).fetchall()
            assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1)), task_id
            kinds = [kind for _, kind, _ in events]
            assert kinds.count("task_finished") == 1 and kinds[-1] == "task_finished", task_id
            resumed = [data for _, kind, data in events if kind == "task_resumed"]
            if task_id == victim:
                assert len(resumed) == 1, kinds
                assert resumed[0]["reason"].startswith("taken over automatically"), resumed
            else:
                assert resumed == [], (task_id, kinds)

    moved = [s for s in sockets if s.reconnects]
    assert moved, "no socket had to reconnect: the web process died too late"
    for s in sockets:
        seqs = [frame["seq"] for frame in s.frames]
        assert seqs == list(range(1, len(seqs) + 1)), (s.index, s.reconnects, seqs)

    assert cluster.ctrl_c() != 0
    deadline = time.monotonic() + 30
    while processes_with_marker(cluster.marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with_marker(cluster.marker) == []
