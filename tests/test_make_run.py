"""`make run` as a newcomer uses it: real processes, Ctrl-C, and no orphan left behind.

Ctrl-C is simulated the way a terminal delivers it: SIGINT to the whole foreground process group.
Every child of `make run` inherits AGENTKIT_RUN_ID, so strays are found by scanning /proc.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT, free_port, server_env, wait_for_port

pytestmark = pytest.mark.slow


def processes_with_marker(marker: str) -> list[str]:
    found = []
    needle = f"AGENTKIT_RUN_ID={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(f"{entry.name}: {cmdline.strip()}")
    return found


class MakeRun:
    def __init__(self, tmp: Path, port: int):
        self.marker = f"test-{uuid.uuid4().hex}"
        self.port = port
        env = server_env(tmp, PORT=str(port), AGENTKIT_RUN_ID=self.marker)
        self.log = open(tmp / f"make-run-{port}-{self.marker[-6:]}.log", "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def ctrl_c(self, timeout: float = 120.0) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"make run did not exit within {timeout:g} s of Ctrl-C\n{self.report()}"
            ) from None

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def report(self) -> str:
        return f"--- make run output ---\n{self.output()}--- end of make run output ---"

    def wait_for_output(self, text: str, *, timeout: float) -> None:
        """Until make run prints `text`: it got that far. Reads its log (cheap, unlike scanning
        /proc), fails at once with the output when make run exits first."""
        deadline = time.monotonic() + timeout
        while text not in self.output():
            assert self.proc.poll() is None, (
                f"make run exited before printing {text!r}\n{self.report()}"
            )
            assert time.monotonic() < deadline, (
                f"make run did not print {text!r} within {timeout:g} s\n{self.report()}"
            )
            time.sleep(0.05)

    def wait_until_no_orphans(self, timeout: float = 15.0) -> list[str]:
        deadline = time.monotonic() + timeout
        left = processes_with_marker(self.marker)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = processes_with_marker(self.marker)
        return left

    def kill_everything(self) -> None:
        for line in processes_with_marker(self.marker):
            pid = int(line.split(":")[0])
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def runs():
    """Every MakeRun of the test. Its output is printed at teardown, so pytest shows it with any
    failure (an assertion, a timeout, an exception), and stray processes are killed."""
    started: list[MakeRun] = []
    yield started
    for run in started:
        print(f"make run on port {run.port} (exit {run.proc.poll()}):\n{run.report()}")
        run.kill_everything()
        run.log.close()


def test_make_run_serves_login_page_and_ctrl_c_stops_everything(tmp_path, runs):
    run = MakeRun(tmp_path, free_port())
    runs.append(run)
    wait_for_port(run.port, timeout=120, process=run.proc)
    page = httpx.get(f"http://127.0.0.1:{run.port}/accounts/login/", timeout=10)
    assert page.status_code == 200
    assert "Log in to agentkit" in page.text
    # the chat page needs a login
    assert httpx.get(f"http://127.0.0.1:{run.port}/", timeout=10).status_code == 302
    children = processes_with_marker(run.marker)
    assert any("redis-server" in c for c in children), children
    assert any("rqworker" in c for c in children), children
    assert any("daphne" in c for c in children), children
    deadline = time.monotonic() + 15  # the URL is printed just after the port opens
    while f"http://127.0.0.1:{run.port}/" not in run.output():
        assert time.monotonic() < deadline, run.output()
        time.sleep(0.1)

    run.ctrl_c()
    assert run.wait_until_no_orphans() == []


def test_ctrl_c_during_start_up_leaves_no_orphan(tmp_path, runs):
    run = MakeRun(tmp_path, free_port())
    runs.append(run)
    # Interrupt as soon as Redis is up, while the worker and Daphne are still starting. Getting
    # there (install check, migrate, bootstrap) takes seconds here but minutes on a loaded
    # 2-core machine: wait for make run to say it, not for a fixed time.
    run.wait_for_output("redis on 127.0.0.1:", timeout=600)
    run.ctrl_c()
    left = run.wait_until_no_orphans(timeout=60)
    assert left == [], f"left running after Ctrl-C: {left}\n{run.report()}"


def test_second_make_run_on_a_busy_port_says_so_and_a_restart_works(tmp_path, runs):
    port = free_port()
    first = MakeRun(tmp_path, port)
    runs.append(first)
    wait_for_port(port, timeout=120, process=first.proc)

    second = MakeRun(tmp_path, port)
    runs.append(second)
    assert second.proc.wait(timeout=120) != 0
    assert f"port {port} on 127.0.0.1 is already in use" in second.output()
    assert "PORT=8001" in second.output()
    assert second.wait_until_no_orphans() == []
    assert httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=10).status_code == 200

    first.ctrl_c()
    assert first.wait_until_no_orphans() == []

    again = MakeRun(tmp_path, port)
    runs.append(again)
    wait_for_port(port, timeout=120, process=again.proc)
    assert httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=10).status_code == 200
    again.ctrl_c()
    assert again.wait_until_no_orphans() == []
