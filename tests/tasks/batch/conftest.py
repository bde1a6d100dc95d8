"""Fixtures of the batch tests: a migrated, bootstrapped agentkit (private SQLite file and var
dir) that `manage.py run_tasks` subprocesses share, with a config whose scripted models are
quick (`main`), paced (`paced`: about a second a task) or slow (`slow`: a minute a task)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.evolution.conftest import evolution_queue  # noqa: F401  (a fixture used here)
from tests.support import ROOT, manage, migrate_sqlite, server_env

# Workspaces the tests copy and give the agent (prelint/: a deliberately failing test of its own):
# their files are material, not tests of this project.
collect_ignore = ["workspaces"]

SHIPPED = (ROOT / "agentkit.yaml").read_text()
WORDS = " ".join(f"word{i}" for i in range(200))
EXTRA_MODELS = """\
  paced:
    provider: scripted
    model: scripted-paced
    script: {paced}
    chunk_delay_ms: 60
  slow:
    provider: scripted
    model: scripted-slow
    script: {slow}
    chunk_delay_ms: 300
  lint_fix:
    provider: scripted
    script: {scripts}/lint_fix.yaml
  lint_adds:
    provider: scripted
    script: {scripts}/lint_adds.yaml
"""


@dataclass
class BatchEnv:
    tmp: Path
    env: dict[str, str]

    def run_tasks(self, *args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "run_tasks", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "manage.py", "run_tasks", *args],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def suite(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(textwrap.dedent(text))
        return path

    def query(self, sql: str, *params) -> list[tuple]:
        with sqlite3.connect(self.tmp / "db.sqlite3") as db:
            return db.execute(sql, params).fetchall()


def batch_config(tmp: Path) -> Path:
    (tmp / "paced.yaml").write_text(
        json.dumps({"turns": [{"text": "one two three four five six seven eight nine ten "
                              "eleven twelve thirteen fourteen", "repeat": True}]})
    )  # fmt: skip
    (tmp / "slow.yaml").write_text(json.dumps({"turns": [{"text": WORDS, "repeat": True}]}))
    text = SHIPPED.replace("    chunk_delay_ms: 25 ", "    chunk_delay_ms: 0  ")
    assert "chunk_delay_ms: 0" in text
    anchor = "  # Examples — uncomment one"
    assert anchor in text
    extra = EXTRA_MODELS.format(
        paced=tmp / "paced.yaml", slow=tmp / "slow.yaml", scripts=Path(__file__).parent / "scripts"
    )
    text = text.replace(anchor, extra + anchor)
    path = tmp / "agentkit.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def batch_env(tmp_path_factory) -> BatchEnv:
    tmp = tmp_path_factory.mktemp("batch")
    env = server_env(tmp, AGENTKIT_CONFIG=str(batch_config(tmp)))
    migrate_sqlite(env)
    done = manage(env, "bootstrap")
    assert done.returncode == 0, done.stderr
    return BatchEnv(tmp, env)
