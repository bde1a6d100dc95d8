"""str_replace_editor refuses what it must not touch (seed 000 U1 error paths): paths outside the
workspace (traversal, absolute paths, symlinks, a file swapped for a symlink between two
calls), edits under .git, and binary or oversized files."""

from __future__ import annotations

import pytest

from tests.tools.conftest import SECRET
from tests.tools.editor_support import edit

# --- paths outside the workspace --------------------------------------------------------------


@pytest.mark.parametrize("command", ["view", "create", "str_replace", "insert_at_line"])
async def test_path_traversal_is_refused(call, workspace, outside, command):
    arguments = {
        "view": {},
        "create": {"file_text": "pwned"},
        "str_replace": {"old_str": "TOP", "new_str": "pwned"},
        "insert_at_line": {"insert_line": 0, "new_str": "pwned"},
    }[command]

    result = await edit(call, command=command, path="../outside/secret.txt", **arguments)
    deep = await edit(call, command=command, path="../../../../../../etc/passwd", **arguments)

    assert result.error_code == deep.error_code == "path_outside_workspace"
    assert (outside / "secret.txt").read_text() == SECRET


async def test_absolute_path_outside_the_workspace_is_refused(call, outside):
    viewed = await edit(call, command="view", path="/etc/passwd")
    written = await edit(
        call, command="create", path=str(outside / "new.txt"), file_text="x", overwrite=True
    )

    assert viewed.error_code == written.error_code == "path_outside_workspace"
    assert "root:" not in viewed.output
    assert not (outside / "new.txt").exists()


async def test_symlink_escape_is_refused(call, workspace, outside):
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "vendor").symlink_to(outside, target_is_directory=True)

    replaced = await edit(call, command="str_replace", path="link.txt", old_str="TOP", new_str="X")
    created = await edit(call, command="create", path="vendor/evil.py", file_text="x = 1\n")
    viewed = await edit(call, command="view", path="vendor")

    assert replaced.error_code == created.error_code == viewed.error_code
    assert replaced.error_code == "path_outside_workspace"
    assert (outside / "secret.txt").read_text() == SECRET
    assert not (outside / "evil.py").exists()


# --- file swapped for a symlink between two calls ---------------------------------------------


async def test_file_swapped_for_a_symlink_between_two_calls_is_refused(call, workspace, outside):
    target = workspace / "config.txt"
    target.write_text("TOP = 1\n")
    first = await edit(call, command="view", path="config.txt")
    assert first.ok

    target.unlink()
    target.symlink_to(outside / "secret.txt")
    viewed = await edit(call, command="view", path="config.txt")
    replaced = await edit(
        call, command="str_replace", path="config.txt", old_str="TOP", new_str="X"
    )
    read = await call("read_file", path="config.txt")

    assert viewed.error_code == replaced.error_code == read.error_code == "path_outside_workspace"
    assert "TOP SECRET" not in viewed.output + read.output
    assert (outside / "secret.txt").read_text() == SECRET


# --- protected, binary and oversized files ----------------------------------------------------


async def test_edits_under_git_are_refused(call, workspace):
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")

    result = await edit(call, command="create", path=".git/hooks/post-checkout", file_text="x")

    assert result.error_code == "path_protected"
    assert not (workspace / ".git" / "hooks").exists()


async def test_binary_and_oversized_files_are_refused(call, workspace):
    (workspace / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    with (workspace / "huge.txt").open("wb") as handle:
        handle.truncate(10 * 1024 * 1024 + 1)
        handle.seek(0)
        handle.write(b"text")

    binary = await edit(call, command="str_replace", path="logo.png", old_str="PNG", new_str="GIF")
    viewed = await edit(call, command="view", path="logo.png")
    huge = await edit(call, command="insert_at_line", path="huge.txt", insert_line=0, new_str="x")

    assert binary.error_code == viewed.error_code == "binary_file"
    assert huge.error_code == "file_too_large"
