"""`make cluster` as a team uses it (issue 29): a private PostgreSQL made with initdb under the
var dir, Redis, two web processes on PORT and PORT+1, agent workers, executor rq from
var/cluster.env. A task sent by the JSON API to one web process is read from the other; a
socket whose web process is SIGKILLed mid-stream reconnects to the other port and replays from
its last seq, every event once; Ctrl-C leaves no process (PostgreSQL included)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest
import websockets

from tests.load_driver import login_cookie
from tests.services import postgres_bin_dir
from tests.support import ROOT, free_port, server_env
from tests.test_make_run import processes_with_marker

pytestmark = pytest.mark.slow

CONFIG = """
models:
  main: {provider: scripted, model: scripted-demo, chunk_delay_ms: 60}
evolution: {enabled: false}
"""


class MakeCluster:
    def __init__(self, tmp: Path, port: int, *, workers: int = 2, config: str = CONFIG):
        self.port = port
        self.marker = f"cluster-test-{port}-{time.time_ns()}"
        # PostgreSQL runs as `postgres` when we are root: its directory must be reachable
        self.var = Path(tempfile.mkdtemp(prefix="agentkit-cluster-"))
        self.var.chmod(0o755)
        (tmp / "agentkit.yaml").write_text(config)
        env = server_env(
            tmp,
            PORT=str(port),
            WEB="2",
            WORKERS=str(workers),
            AGENTKIT_RUN_ID=self.marker,
            AGENTKIT_VAR_DIR=str(self.var),
            AGENTKIT_CONFIG=str(tmp / "agentkit.yaml"),
        )
        env.pop("DATABASE_URL")  # a private PostgreSQL under var/pg
        self.log = open(tmp / "make-cluster.log", "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["make", "--no-print-directory", "cluster"],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def wait_healthy(self, port: int, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"make cluster exited\n{self.output()}"
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                if response.status_code == 200:
                    return response.json()
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"port {port} never healthy\n{self.output()}"
            time.sleep(0.5)

    def manage(self, *args: str) -> subprocess.CompletedProcess:
        """A manage.py command beside the cluster, with var/cluster.env as the docs say."""
        env_file = self.var / "cluster.env"
        command = f"set -a; . {env_file}; set +a; .venv/bin/python manage.py {' '.join(args)}"
        clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
        clean["AGENTKIT_VAR_DIR"] = str(self.var)
        return subprocess.run(
            ["bash", "-c", command], cwd=ROOT, env=clean, capture_output=True, text=True
        )

    def web_pid(self, port: int) -> int:
        for line in processes_with_marker(self.marker):
            pid, cmdline = line.split(":", 1)
            if "daphne" in cmdline and f"-p {port} " in cmdline and "respawn" not in cmdline:
                return int(pid)
        raise AssertionError(f"no web process on port {port}")

    def worker_pids(self) -> list[int]:
        """The `rqworker agent` processes (not their respawn loops)."""
        return [
            int(line.split(":", 1)[0])
            for line in processes_with_marker(self.marker)
            if "rqworker agent" in line and "respawn" not in line
        ]

    def env_value(self, name: str) -> str:
        for line in (self.var / "cluster.env").read_text().splitlines():
            if line.startswith(f"{name}="):
                return line.split("=", 1)[1]
        raise KeyError(name)

    def ctrl_c(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout=120)


@pytest.fixture
def cluster(tmp_path):
    if postgres_bin_dir() is None:
        pytest.fail("make cluster needs PostgreSQL's server binaries: apt-get install postgresql")
    started = MakeCluster(tmp_path, free_port())
    yield started
    print(f"make cluster (exit {started.proc.poll()}):\n{started.output()}")
    for line in processes_with_marker(started.marker):
        os.kill(int(line.split(":")[0]), signal.SIGKILL)
    shutil.rmtree(started.var, ignore_errors=True)


async def _follow_kill_and_resume(cluster: MakeCluster, cookie: str) -> list[dict]:
    first, second = cluster.port, cluster.port + 1
    headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{first}"}
    got: list[dict] = []
    async with websockets.connect(
        f"ws://127.0.0.1:{first}/ws/chat/", additional_headers=headers
    ) as socket:
        await socket.send(
            json.dumps({"type": "user_message", "text": "hello there", "client_msg_id": "c-1"})
        )
        async with asyncio.timeout(120):
            while len(got) < 5:
                frame = json.loads(await socket.recv())
                if "seq" in frame:
                    got.append(frame)
        os.kill(cluster.web_pid(first), signal.SIGKILL)  # mid-stream
        with pytest.raises(websockets.ConnectionClosed):
            async with asyncio.timeout(30):
                while True:
                    frame = json.loads(await socket.recv())
                    if "seq" in frame:
                        got.append(frame)
    task_id = got[0]["task_id"]
    headers["Origin"] = f"http://127.0.0.1:{second}"
    async with websockets.connect(
        f"ws://127.0.0.1:{second}/ws/chat/", additional_headers=headers
    ) as socket:
        await socket.send(
            json.dumps({"type": "resume", "task_id": task_id, "after_seq": got[-1]["seq"]})
        )
        async with asyncio.timeout(120):
            while got[-1]["type"] != "task_finished":
                frame = json.loads(await socket.recv())
                if frame.get("task_id") == task_id and "seq" in frame:
                    got.append(frame)
    return got


def test_make_cluster_serves_both_ports_survives_a_dead_web_process_and_stops_on_ctrl_c(cluster):
    health = cluster.wait_healthy(cluster.port, timeout=600)
    assert health["workers"]["required"] and health["workers"]["seen"] == 2  # the agent workers
    cluster.wait_healthy(cluster.port + 1, timeout=60)
    env = (cluster.var / "cluster.env").read_text()
    assert "AGENTKIT_EXECUTOR=rq" in env and "DATABASE_URL=postgres://" in env

    made = cluster.manage("create_api_token", "admin")
    assert made.returncode == 0, made.stderr
    auth = {"Authorization": f"Bearer {made.stdout.strip().splitlines()[-1]}"}
    created = httpx.post(
        f"http://127.0.0.1:{cluster.port}/api/tasks",
        json={"workspace": "demo", "text": "hello there"},
        headers=auth,
        timeout=30,
    )
    assert created.status_code == 201, created.text
    task_id = created.json()["id"]
    deadline = time.monotonic() + 120
    other = f"http://127.0.0.1:{cluster.port + 1}/api/tasks/{task_id}"
    while httpx.get(other, headers=auth, timeout=30).json()["status"] != "completed":
        assert time.monotonic() < deadline, "the API task did not complete"
        time.sleep(0.5)
    events = httpx.get(f"{other}/events?after=0", headers=auth, timeout=30).json()["events"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events].count("task_finished") == 1

    cookie = login_cookie(f"http://127.0.0.1:{cluster.port}", "admin", "correct-horse-battery")
    frames = asyncio.run(_follow_kill_and_resume(cluster, cookie))
    seqs = [frame["seq"] for frame in frames]
    assert seqs == list(range(1, len(seqs) + 1)), seqs  # every event once, none lost
    assert frames[-1]["type"] == "task_finished" and frames[-1]["data"]["status"] == "completed"
    # the killed web process was started again
    cluster.wait_healthy(cluster.port, timeout=120)

    assert cluster.ctrl_c() != 0
    deadline = time.monotonic() + 30
    while processes_with_marker(cluster.marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with_marker(cluster.marker) == []
    assert not (cluster.var / "pg" / "data" / "postmaster.pid").exists()  # PostgreSQL stopped
