"""Chaos on `make cluster`, as a team's service meets it: tasks sent by the JSON API (react,
direct_chat, plan_exec) and by WebSocket to both web processes, and the example suite by
`run_tasks --executor rq` beside the cluster (through var/cluster.env), while agent workers, web
processes and the evolution worker are SIGKILLed at random moments (respawn.sh starts them again).

    .venv/bin/python -m tests.cluster_chaos [--seed N] [--seconds S]

Then it checks that every task ended exactly once as expected (`completed`, the suite's as its
expectations say), with contiguous events and one `task_finished`, last; that every socket got
every event of its task once, in order, across its reconnections; and that Ctrl-C leaves no
process. Exit 0 when all holds; it prints what did not. Needs PostgreSQL's server binaries, as
`make cluster` does. tests/test_cluster_integration.py is the fixed-moment version in the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

from tests.load_driver import login_cookie
from tests.support import ROOT, free_port
from tests.test_cluster_integration import MAKE_WORKSPACES, WORKSPACES, Socket
from tests.test_make_cluster import MakeCluster, processes_with_marker

CONFIG = """
models:
  main: {provider: scripted, model: scripted-demo, chunk_delay_ms: 15}
spec_review: {enabled: false}
executor: {orphan_after_seconds: 6}
"""
TASKS = 30  # by the API, and as many by WebSocket
MODES = ("react", "direct_chat", "plan_exec")


def victims(cluster: MakeCluster) -> list[tuple[str, int]]:
    """(kind, pid) of the cluster's processes (not their respawn loops)."""
    found = []
    for line in processes_with_marker(cluster.marker):
        pid, command = line.split(":", 1)
        if "respawn" in command:
            continue
        for kind, mark in (("agent", "rqworker agent"), ("evolution", "rqworker evolution")):
            if mark in command:
                found.append((kind, int(pid)))
        if "daphne" in command:
            found.append(("web", int(pid)))
    return found


async def chaos(cluster: MakeCluster, seconds: float, rng: random.Random, kills: list) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await asyncio.sleep(rng.uniform(0.5, 5))
        found = victims(cluster)
        if found:
            kind, pid = rng.choice(found)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            kills.append(kind)
            print(f"killed {kind} {pid}", flush=True)


async def send_by_api(client: httpx.AsyncClient, ports, token: str, i: int, rng) -> int:
    mode = MODES[i % len(MODES)]
    text = (
        f"hello there {i}"
        if mode == "direct_chat"
        else "fix the failing test in tests/test_slug.py"
    )
    body = {"workspace": f"it-{i % WORKSPACES}", "text": text, "mode": mode}
    body["client_msg_id"] = f"api-{i}"  # sent again after a dead web process: the same task
    while True:
        try:
            made = await client.post(
                f"http://127.0.0.1:{rng.choice(ports)}/api/tasks",
                json=body,
                headers={"Authorization": f"Bearer {token}"},
            )
            if made.status_code in (200, 201):
                return made.json()["id"]
            print(f"api answered {made.status_code}: {made.text[:200]}", flush=True)
        except httpx.HTTPError as exc:
            print(f"api unreachable: {exc!r}", flush=True)
        await asyncio.sleep(0.5)


async def drive(cluster: MakeCluster, token: str, cookie: str, seconds: float, rng):
    first, second = cluster.port, cluster.port + 1
    kills: list[str] = []
    chaotic = asyncio.ensure_future(chaos(cluster, seconds, rng, kills))
    sockets, running, api_ids = [], [], []
    async with httpx.AsyncClient(timeout=30) as client:
        for i in range(TASKS):
            here, other = (first, second) if i % 2 == 0 else (second, first)
            sockets.append(Socket(i, here, other, cookie))
            running.append(asyncio.ensure_future(sockets[-1].run()))
            api_ids.append(await send_by_api(client, (first, second), token, i, rng))
            await asyncio.sleep(rng.uniform(0, 0.6))
    await chaotic
    async with asyncio.timeout(600):
        await asyncio.gather(*running)
    return api_ids, sockets, kills


def check(db_url: str, api_ids, sockets, suite: dict) -> list:
    problems: list = []
    deadline = time.monotonic() + 300
    while True:
        with psycopg.connect(db_url, autocommit=True) as db:
            tasks = db.execute("select id, status, mode, error from tasks_task").fetchall()
        if all(status not in ("queued", "running") for _, status, _, _ in tasks):
            break
        if time.monotonic() > deadline:
            return [("stuck", [t for t in tasks if t[1] in ("queued", "running")])]
        time.sleep(1)
    expected = {row["task_id"]: row["expected"].get("status", "completed") for row in suite}
    with psycopg.connect(db_url, autocommit=True) as db:
        for task_id, status, mode, error in tasks:
            kinds = [
                kind
                for (kind,) in db.execute(
                    "select type from tasks_taskevent where task_id=%s order by seq", (task_id,)
                )
            ]
            (count, top) = db.execute(
                "select count(*), max(seq) from tasks_taskevent where task_id=%s", (task_id,)
            ).fetchone()
            if count != top:
                problems.append((task_id, "events not contiguous"))
            if kinds.count("task_finished") != 1 or kinds[-1:] != ["task_finished"]:
                problems.append((task_id, "task_finished", kinds[-3:]))
            if status != expected.get(task_id, "completed"):
                problems.append((task_id, mode, status, (error or {}).get("error_code")))
    ids = [s.task_id for s in sockets]
    if None in ids or len(set(ids) | set(api_ids)) != len(ids) + len(api_ids):
        problems.append(("one task per message", ids, api_ids))
    for s in sockets:
        seqs = [frame["seq"] for frame in s.frames]
        if seqs != list(range(1, len(seqs) + 1)):
            problems.append(("socket", s.index, s.reconnects, seqs))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=60, help="how long processes are killed")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="agentkit-chaos-"))
    cluster = MakeCluster(tmp, free_port(), workers=3, config=CONFIG)
    try:
        cluster.wait_healthy(cluster.port, timeout=600)
        cluster.wait_healthy(cluster.port + 1, timeout=60)
        token = cluster.manage("create_api_token", "admin").stdout.strip().splitlines()[-1]
        made = cluster.manage("shell", "-c", shlex.quote(MAKE_WORKSPACES))
        assert made.returncode == 0, made.stderr
        cookie = login_cookie(f"http://127.0.0.1:{cluster.port}", "admin", "correct-horse-battery")
        report = tmp / "suite.json"
        command = (
            f"set -a; . {cluster.var}/cluster.env; set +a; .venv/bin/python manage.py run_tasks "
            f"examples/suite.yaml --executor rq --concurrency 4 --report {report}"
        )
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        with open(tmp / "run_tasks.log", "w") as log:
            batch = subprocess.Popen(
                ["bash", "-c", command], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                env={**env, "AGENTKIT_VAR_DIR": str(cluster.var)},
            )  # fmt: skip
            api_ids, sockets, kills = asyncio.run(drive(cluster, token, cookie, args.seconds, rng))
            batch.wait(timeout=900)
        suite = json.loads(report.read_text())["tasks"]
        problems = check(cluster.env_value("DATABASE_URL"), api_ids, sockets, suite)
        print(
            f"{len(kills)} processes killed: "
            + ", ".join(f"{kills.count(k)} {k}" for k in sorted(set(kills)))
        )
        print(f"{len(api_ids)} API tasks, {len(sockets)} socket tasks, {len(suite)} run_tasks tasks; "
              f"{sum(s.reconnects for s in sockets)} socket reconnections")  # fmt: skip
        cluster.ctrl_c()
        deadline = time.monotonic() + 30
        while processes_with_marker(cluster.marker) and time.monotonic() < deadline:
            time.sleep(0.5)
        if processes_with_marker(cluster.marker):
            problems.append(("left after Ctrl-C", processes_with_marker(cluster.marker)))
        for problem in problems:
            print("PROBLEM", problem)
        if problems:
            print(f"{len(problems)} problems; logs in {tmp}, the cluster's files in {cluster.var}")
            return 1
        print("all held")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(cluster.var, ignore_errors=True)
        return 0
    finally:
        for line in processes_with_marker(cluster.marker):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)


if __name__ == "__main__":
    raise SystemExit(main())
