"""docs/deployment.md's "Several hosts", followed literally on one machine (issue 29): its
environment block (the plain-HTTP part: no proxy), its setup, static and honcho blocks — found by
their `<!-- deployment: NAME -->` markers and run as written, with only host names, paths,
passwords and the port adapted — against a real PostgreSQL and Redis. Two web processes and two
agent workers (and the evolution worker) from the doc's own two honcho lines: /healthz is 200 on
both ports, a session made on one port works on the other, a task sent through the JSON API to
each port completes, each on its own worker, both in the one shared workspaces root."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from honcho.environ import parse as honcho_parse
from redis import Redis
from rq.job import Job

from tests.load_driver import login_cookie
from tests.services import private_redis
from tests.support import ROOT, free_port
from tests.test_make_run import processes_with_marker

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "deployment.md"
MARKER = re.compile(r"^\s*<!-- deployment: ([\w-]+) -->\s*$")
# What a reader adapts to their machine: everything else in the blocks runs as written.
CHECKOUT, ENV_FILE = "/srv/agentkit", "/etc/agentkit.env"
ADAPTED = (
    "DATABASE_URL",
    "REDIS_URL",
    "AGENTKIT_WORKSPACES_DIR",
    "AGENTKIT_VAR_DIR",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
)
# The task the shipped scripted model answers by editing the demo (or finding it edited).
FIX = "fix the failing test in tests/test_slug.py"


def doc_blocks(path: Path = DOC) -> dict[str, str]:
    """{name: text} of each fenced block whose fence follows a `<!-- deployment: NAME -->`
    line, de-indented (blocks inside a numbered list are indented)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: dict[str, str] = {}
    for i, line in enumerate(lines):
        marker = MARKER.match(line)
        if not marker:
            continue
        fence = lines[i + 1] if i + 1 < len(lines) else ""
        assert fence.strip().startswith("```"), f"{path.name}:{i + 1}: no fence after the marker"
        indent = len(fence) - len(fence.lstrip())
        body = []
        for inner in lines[i + 2 :]:
            if inner.strip() == "```":
                break
            body.append(inner[indent:])
        else:
            raise AssertionError(f"{path.name}:{i + 2}: fence never closed")
        assert marker.group(1) not in blocks, f"two blocks named {marker.group(1)}"
        blocks[marker.group(1)] = "\n".join(body) + "\n"
    return blocks


def systemd_parse(text: str) -> dict[str, str]:
    """An environment file as systemd's EnvironmentFile= reads unquoted lines: `#`/`;` start a
    comment only at the start of a line; the value is the rest of the line, trimmed."""
    values = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        name, _, value = stripped.partition("=")
        values[name.strip()] = value.strip()
    return values


def bash_parse(text: str, tmp: Path) -> dict[str, str]:
    """What `set -a; . FILE; set +a` exports, as the doc's setup block reads the file."""
    path = tmp / "bash-read.env"
    path.write_text(text)
    names = list(systemd_parse(text))
    script = f"set -a; . {shlex.quote(str(path))}; set +a; " + "; ".join(
        f'printf "%s\\0" "${{{name}-<unset>}}"' for name in names
    )
    out = subprocess.run(["bash", "-c", script], env={}, capture_output=True, check=True)
    return dict(zip(names, out.stdout.decode().split("\0")[:-1], strict=True))


def adapt(text: str, **paths: str) -> str:
    return text.replace(ENV_FILE, paths["env_file"]).replace(CHECKOUT, str(ROOT))


def test_the_marked_blocks_are_found_in_a_list_and_de_indented(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- deployment: one -->\n```sh\nA=1\n# note\n```\n"
        "1. step\n\n   <!-- deployment: two -->\n   ```sh\n   cd /srv\n   run it\n   ```\n"
        "```sh\nunmarked\n```\n"
    )
    assert doc_blocks(page) == {"one": "A=1\n# note\n", "two": "cd /srv\nrun it\n"}


def test_the_environment_block_reads_the_same_in_bash_honcho_and_systemd(tmp_path):
    blocks = doc_blocks()
    for name in ("environment", "environment-https"):
        text = blocks[name]
        by_systemd = systemd_parse(text)
        assert by_systemd, f"the {name} block sets nothing"
        assert honcho_parse(text) == by_systemd, f"honcho reads the {name} block otherwise"
        assert bash_parse(text, tmp_path) == by_systemd, f"bash reads the {name} block otherwise"


@pytest.fixture
def walk(tmp_path, postgres_url):
    """The environment file of docs/deployment.md (no proxy: its first block alone), adapted."""
    tmp_path.chmod(0o755)  # the sandbox's user reads the workspaces below it
    with private_redis(tmp_path) as redis_url:
        values = systemd_parse(doc_blocks()["environment"])
        missing = [name for name in ADAPTED if name not in values]
        assert not missing, f"the doc's environment block no longer sets {missing}"
        values.update(
            DATABASE_URL=postgres_url,
            REDIS_URL=redis_url,
            AGENTKIT_WORKSPACES_DIR=str(tmp_path / "workspaces"),
            AGENTKIT_VAR_DIR=str(tmp_path / "var"),
            SECRET_KEY="a-test-secret-key-" + "x" * 40,
            ALLOWED_HOSTS="127.0.0.1",
        )
        env_file = tmp_path / "agentkit.env"
        env_file.write_text(
            "".join(
                f"{name}={value.replace(CHECKOUT, str(ROOT))}\n" for name, value in values.items()
            )
        )
        env_file.chmod(0o600)
        marker = f"deployment-doc-{time.time_ns()}"
        # The reader's shell: nothing of this test run's settings (DATABASE_URL, AGENTKIT_*).
        shell = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AGENTKIT_", "DJANGO_")) and k not in {"DATABASE_URL", "PORT"}
        }
        shell.pop("REDIS_URL", None)
        shell["AGENTKIT_RUN_ID"] = marker  # to find every process it starts
        yield tmp_path, env_file, shell, marker
        for line in processes_with_marker(marker):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)


def run_block(text: str, env_file: Path, shell: dict[str, str]) -> str:
    script = "set -e -o pipefail\n" + adapt(text, env_file=str(env_file))
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=shell, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def healthy(port: int, procs: list[subprocess.Popen], logs: list[Path]) -> dict:
    deadline = time.monotonic() + 120
    while True:
        for proc, log in zip(procs, logs, strict=True):
            assert proc.poll() is None, f"a honcho line exited:\n{log.read_text()}"
        try:
            answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
            if answer.status_code == 200 and answer.json()["workers"]["seen"] >= 2:
                return answer.json()
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"port {port} never healthy:\n{logs[0].read_text()}"
        time.sleep(0.5)


def test_several_hosts_followed_literally_on_one_machine(walk):
    tmp, env_file, shell, marker = walk
    blocks = doc_blocks()
    setup = run_block(blocks["setup"], env_file, shell)
    password = re.search(r"with password: (\S+)", setup)
    assert password, f"bootstrap printed no admin password:\n{setup}"
    run_block("set -a; . /etc/agentkit.env; set +a\n" + blocks["static"], env_file, shell)
    assert (tmp / "var" / "static" / "agentkit.css").is_file()

    lines = [line for line in blocks["processes"].splitlines() if "honcho start" in line]
    assert len(lines) == 2, blocks["processes"]
    port = free_port()
    while free_port() == port + 1:  # the web line's second process takes port + 1
        port = free_port()
    procs, logs = [], []
    for n, line in enumerate(lines):
        command = re.sub(r"(\s-p\s+)8000\b", rf"\g<1>{port}", adapt(line, env_file=str(env_file)))
        logs.append(tmp / f"honcho-{n}.log")
        with open(logs[-1], "wb") as log:
            procs.append(
                subprocess.Popen(
                    ["bash", "-c", f"exec {command}"],
                    cwd=ROOT,
                    env=shell,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    try:
        ports = (port, port + 1)
        for web in ports:
            assert healthy(web, procs, logs)["workers"]["seen"] == 2  # the 2 agent workers

        for web in ports:  # plain HTTP serves pages: no HTTPS=1 outside the https block
            page = httpx.get(f"http://127.0.0.1:{web}/accounts/login/", timeout=10)
            assert page.status_code == 200, (page.status_code, page.headers.get("location"))
        cookie = login_cookie(f"http://127.0.0.1:{port}", "admin", password.group(1))
        mine = httpx.get(f"http://127.0.0.1:{port + 1}/api/workspaces", headers={"Cookie": cookie})
        assert mine.status_code == 200 and mine.json()["workspaces"][0]["name"] == "demo"

        made = run_block(
            "set -a; . /etc/agentkit.env; set +a\n"
            ".venv/bin/python manage.py create_api_token admin\n",
            env_file,
            shell,
        )
        auth = {"Authorization": f"Bearer {made.strip().splitlines()[-1]}"}
        ids = []
        for web in ports:
            created = httpx.post(
                f"http://127.0.0.1:{web}/api/tasks",
                json={"workspace": "demo", "text": FIX, "mode": "react"},
                headers=auth,
                timeout=30,
            )
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        answers = {}
        deadline = time.monotonic() + 120
        for task_id, web in zip(ids, reversed(ports), strict=True):  # read from the other port
            while (task := _task(web, task_id, auth))["status"] not in {"completed", "failed"}:
                assert time.monotonic() < deadline, f"task {task_id} did not finish: {task}"
                time.sleep(0.5)
            assert task["status"] == "completed", task
            answers[task_id] = task["result"]
    finally:
        for proc in procs:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C
        for proc in procs:
            proc.wait(timeout=60)
    for log in logs:
        print(log.read_text()[-6000:])

    connection = Redis.from_url(systemd_parse(env_file.read_text())["REDIS_URL"])
    workers = {Job.fetch(f"task-{task_id}-1", connection=connection).worker_name for task_id in ids}
    assert len(workers) == 2, f"both tasks ran on one worker: {workers}"
    # One shared root: whichever ran second found the first one's edit in the same files.
    fixed = (tmp / "workspaces" / "demo" / "textkit" / "slug.py").read_text()
    assert fixed != (ROOT / "demo" / "workspace" / "textkit" / "slug.py").read_text()
    said = sorted("already" in str(answer) for answer in answers.values())
    assert said == [False, True], answers
    assert processes_with_marker(marker) == []  # Ctrl-C stopped every process


def _task(port: int, task_id: int, auth: dict) -> dict:
    return httpx.get(
        f"http://127.0.0.1:{port}/api/tasks/{task_id}", headers=auth, timeout=30
    ).json()
