"""read_file's error paths (seed 002 U1): missing files (with similar names), directories,
unreadable and binary files, and paths outside the workspace."""

from __future__ import annotations

import os

import pytest

from tests.tools.conftest import SECRET
from tests.tools.read_file_support import read

# --- error paths ------------------------------------------------------------------------------


async def test_missing_file_is_an_error_with_similar_names(call, workspace):
    (workspace / "settings.py").write_text("x = 1\n")

    result = await read(call, path="setings.py")

    assert result.error_code == "file_not_found"
    assert "Did you mean settings.py?" in result.error


async def test_directory_is_an_error(call, workspace):
    (workspace / "pkg").mkdir()

    result = await read(call, path="pkg")

    assert result.error_code == "is_a_directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
async def test_unreadable_file_is_an_error(call, workspace):
    (workspace / "locked.txt").write_text("x\n")
    (workspace / "locked.txt").chmod(0)

    result = await read(call, path="locked.txt")

    assert result.error_code == "permission_denied"


async def test_binary_file_is_an_error(call, workspace):
    (workspace / "data.bin").write_bytes(b"\x00\x01\x02\x03" * 100)

    result = await read(call, path="data.bin")

    assert result.error_code == "binary_file"


async def test_paths_outside_the_workspace_are_refused(call, workspace, outside):
    (workspace / "docs").symlink_to(outside, target_is_directory=True)

    results = [
        await read(call, path="../outside/secret.txt"),
        await read(call, path=str(outside / "secret.txt")),
        await read(call, path="docs/secret.txt"),
    ]

    assert {r.error_code for r in results} == {"path_outside_workspace"}
    assert all(SECRET.strip() not in r.output for r in results)
