"""`make cluster` as root from a checkout inside a private (0700) directory, as /root is (issue
41): PostgreSQL runs as `postgres`, which cannot enter that directory, so var/pg cannot hold its
data; the cluster puts it where `postgres` can reach it, says so, and serves — with its
Prometheus files under var/prometheus, emptied at start, read by `/metrics`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import httpx
import pytest

from tests.services import postgres_bin_dir
from tests.support import ROOT, free_port, server_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the private-directory case is root's"),
    pytest.mark.skipif(postgres_bin_dir() is None, reason="needs PostgreSQL's initdb"),
]


def test_make_cluster_as_root_with_its_var_dir_inside_a_private_directory(tmp_path):
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    var = private / "agentkit" / "var"
    (var / "prometheus").mkdir(parents=True)
    (var / "prometheus" / "counter_999999.db").write_bytes(b"stale, from an earlier run")
    (tmp_path / "agentkit.yaml").write_text("evolution: {enabled: false}\n")
    port = free_port()
    env = server_env(
        tmp_path,
        PORT=str(port),
        WEB="1",
        WORKERS="1",
        AGENTKIT_RUN_ID=f"private-dir-{port}-{time.time_ns()}",
        AGENTKIT_VAR_DIR=str(var),
        AGENTKIT_CONFIG=str(tmp_path / "agentkit.yaml"),
    )
    env.pop("DATABASE_URL")
    log = tmp_path / "make-cluster.log"
    pg_dir = None
    with open(log, "w+b") as out:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "cluster"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 300
            while True:
                assert proc.poll() is None, f"make cluster exited\n{log.read_text()}"
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).is_success:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, f"never healthy\n{log.read_text()}"
                time.sleep(0.5)
            text = log.read_text()
            assert "cannot reach" in text and "/var/tmp/agentkit-pg-" in text, text
            pg_dir = text.split("its data goes to ")[1].split()[0]
            assert (var / "cluster.env").read_text().count(f"PROMETHEUS_MULTIPROC_DIR={var}") == 1
            assert not (var / "prometheus" / "counter_999999.db").exists()  # emptied at start
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30)
            assert metrics.status_code == 200 and "agentkit_queue_depth" in metrics.text
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=90)
            if pg_dir:
                shutil.rmtree(pg_dir, ignore_errors=True)
