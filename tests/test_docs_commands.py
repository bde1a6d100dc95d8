"""The docs stay true: their runnable shell blocks run, their relative links lead somewhere.

A shell block is runnable when the line before its fence is `<!-- runnable -->`, or
`<!-- runnable: server -->` when it talks to a running server (convention in docs/README.md).
Each one runs with bash (`-e -o pipefail`) from the repository root, with this venv's python
first on PATH, against a fresh SQLite database that `migrate` (tests.support.migrate_sqlite)
and `bootstrap` made (the `admin` user, the `demo` workspace), var/ and the workspaces in a
temporary directory, no Redis: what a reader gets right after `make run` set things up, without
touching their var/. A server block gets a real Daphne on that database, its address in
AGENTKIT_URL.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import ROOT, agentkit_server, manage, migrate_sqlite

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)

MARKER = "<!-- runnable -->"
SERVER_MARKER = "<!-- runnable: server -->"
MARKERS = (MARKER, SERVER_MARKER)
FENCE = re.compile(r"^```(\w*)\s*$")
# [text](target) and ![alt](target); the target ends at whitespace or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    runnable: bool
    needs_server: bool = False

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with whether the marker line precedes it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path.relative_to(ROOT)}:{i + 1}: fence never closed")
        previous = lines[i - 1].rstrip() if i else ""
        blocks.append(
            Block(
                path=path,
                line=i + 1,
                lang=opening.group(1),
                text="\n".join(lines[i + 1 : end]) + "\n",
                runnable=previous in MARKERS,
                needs_server=previous == SERVER_MARKER,
            )
        )
        i = end + 1
    return blocks


def runnable_blocks() -> list[Block]:
    return [b for path in doc_files() for b in fenced_blocks(path) if b.runnable]


def test_the_marker_is_only_used_on_shell_blocks_and_the_docs_have_some():
    blocks = runnable_blocks()
    assert any(b.path.name == "README.md" and b.path.parent == ROOT for b in blocks), (
        "README.md has no runnable block"
    )
    assert len(blocks) >= 5, [b.name for b in blocks]
    wrong = [b.name for b in blocks if b.lang not in ("sh", "bash")]
    assert not wrong, f"a runnable marker precedes a block that is not ```sh: {wrong}"
    for path in doc_files():
        text = path.read_text(encoding="utf-8").splitlines()
        marked = [n + 1 for n, line in enumerate(text) if line.rstrip() in MARKERS]
        fenced = {b.line - 1 for b in fenced_blocks(path) if b.runnable}
        stray = [n for n in marked if n not in fenced]
        assert not stray, f"{path.relative_to(ROOT)}: a marker not right before a fence: {stray}"


def test_fenced_block_parser_reads_marker_language_and_body(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "intro\n<!-- runnable -->\n```sh\necho one\necho two\n```\n\n```sh\nnot marked\n```\n"
        "<!-- runnable: server -->\n```sh\ncurl -sf $AGENTKIT_URL\n```\n"
    )
    first, second, third = fenced_blocks(page)
    assert (first.line, first.lang, first.text, first.runnable) == (
        3,
        "sh",
        "echo one\necho two\n",
        True,
    )
    assert (second.text, second.runnable) == ("not marked\n", False)
    assert (first.needs_server, third.runnable, third.needs_server) == (False, True, True)


@pytest.fixture(scope="module")
def docs_env(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("docs-env")
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "AGENTKIT_CONFIG")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(
        DATABASE_URL=f"sqlite:///{tmp}/db.sqlite3",
        AGENTKIT_VAR_DIR=str(tmp / "var"),
        AGENTKIT_WORKSPACES_DIR=str(tmp / "workspaces"),
        SECRET_KEY="docs-test-secret-key-not-used-elsewhere",
        DJANGO_SUPERUSER_USERNAME="admin",
        DJANGO_SUPERUSER_PASSWORD="docs-test-password",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    migrate_sqlite(env)
    proc = manage(env, "bootstrap")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return env


@pytest.fixture(scope="module")
def docs_server(tmp_path_factory):
    """Daphne on a fresh migrated and bootstrapped SQLite database, as `make run` serves."""
    tmp = tmp_path_factory.mktemp("docs-server")
    with agentkit_server(tmp, AGENTKIT_WORKSPACES_DIR=str(tmp / "workspaces")) as server:
        env = dict(server.env)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["AGENTKIT_URL"] = server.url
        yield env


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda b: b.name)
def test_runnable_block_exits_zero(block: Block, request):
    env = request.getfixturevalue("docs_server" if block.needs_server else "docs_env")
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.text],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"{block.name} exited {proc.returncode}\n--- block\n{block.text}"
        f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    )


def relative_links(path: Path) -> list[tuple[int, str]]:
    links: list[tuple[int, str]] = []
    in_fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # http:, https:, mailto: ...; an anchor on the same page
            links.append((number, target.split("#", 1)[0]))
    return links


def test_every_relative_link_points_to_a_file_that_exists():
    broken = []
    for path in doc_files():
        for number, target in relative_links(path):
            if not (path.parent / target).resolve().exists():
                broken.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](page.md) [web](https://example.com) [gone](missing.md#part)\n"
        "```sh\n[in a block](skipped.md)\n```\n"
        "    ```sh\n    an indented example is no fence\n    ```\n"
        "[after](after.md)\n"
    )
    assert relative_links(page) == [(1, "page.md"), (1, "missing.md"), (8, "after.md")]
    assert not (tmp_path / "missing.md").exists()
