"""Real git repositories for the repository-workspace tests: a bare "remote" on file://, a
project in it with a passing test, and a scripted model whose tasks edit files by their goal."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "dev",
    "GIT_AUTHOR_EMAIL": "dev@example.org",
    "GIT_COMMITTER_NAME": "dev",
    "GIT_COMMITTER_EMAIL": "dev@example.org",
    "GIT_TERMINAL_PROMPT": "0",
}

CALC = "def add(a, b):\n    return a + b\n"
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
NOTES = "line one\nline two\nline three\n"


def git(cwd: Path | str, *args: str, check: bool = True) -> str:
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", "-c", "commit.gpgsign=false", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout.strip()


def make_remote(tmp_path: Path) -> Path:
    """A bare repository (branch main) holding a tiny Python project; returns its path."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "calc.py").write_text(CALC)
    (seed / "test_calc.py").write_text(TEST_CALC)
    (seed / "notes.txt").write_text(NOTES)
    git(seed, "init", "-q", "-b", "main")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "initial project")
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    return bare


SCRIPT = textwrap.dedent(
    """
    - match: 'ALPHA'
      role: user
      repeat: true
      text: "adding alpha"
      tool_calls:
        - name: str_replace_editor
          arguments: {command: create, path: alpha.py, file_text: "ALPHA = 1\\n"}
    - match: 'BETA'
      role: user
      repeat: true
      text: "adding beta"
      tool_calls:
        - name: str_replace_editor
          arguments: {command: create, path: beta.py, file_text: "BETA = 2\\n"}
    - match: 'NOTES'
      role: user
      repeat: true
      text: "editing the notes"
      tool_calls:
        - name: str_replace_editor
          arguments: {command: str_replace, path: notes.txt, old_str: "line two", new_str: "line two, said the agent"}
    - match: 'MULTIPLY'
      role: user
      repeat: true
      text: "adding mul with its test"
      tool_calls:
        - name: str_replace_editor
          arguments:
            command: create
            path: mul.py
            file_text: "def mul(a, b):\\n    return a * b\\n"
        - name: str_replace_editor
          arguments:
            command: create
            path: test_mul.py
            file_text: "from mul import mul\\n\\n\\ndef test_mul():\\n    assert mul(3, 4) == 12\\n"
    - role: tool
      repeat: true
      text: "Done: the change is made and the words of this answer stream slowly on purpose."
    """
)


def config_text(tmp_path: Path, *, delay_ms: int = 0) -> str:
    script = tmp_path / "repo_script.yaml"
    script.write_text(SCRIPT)
    return (
        f"models: {{main: {{provider: scripted, script: {script}, chunk_delay_ms: {delay_ms}}}}}\n"
        f"workspaces: {{allowed_roots: [{tmp_path}]}}\n"
    )
