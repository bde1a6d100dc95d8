"""Path safety shared by every file tool: what is accepted resolves inside the workspace, what
is refused is refused with a typed error (never an exception), on real files and links."""

from __future__ import annotations

import os
import socket
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.tools.builtin.paths import PathRefusedError, read_bytes, resolve_path, write_bytes
from apps.tools.builtin.text import decode_text
from tests.tools.conftest import SECRET


def refusal(root: Path, raw: str, *, write: bool = False) -> str:
    with pytest.raises(PathRefusedError) as caught:
        resolve_path(root, raw, write=write)
    return caught.value.error_code


def test_relative_and_absolute_paths_inside_the_workspace_are_accepted(workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("x = 1\n")

    relative = resolve_path(workspace, "src/app.py")
    absolute = resolve_path(workspace, str(workspace / "src" / "app.py"))
    roundabout = resolve_path(workspace, "src/../src/./app.py")

    assert relative.path == absolute.path == roundabout.path == workspace / "src" / "app.py"
    assert relative.shown == "src/app.py"
    assert resolve_path(workspace, ".").shown == "."


def test_dotdot_escape_is_refused(workspace):
    assert refusal(workspace, "../../etc/passwd") == "path_outside_workspace"
    assert refusal(workspace, "src/../../outside/secret.txt") == "path_outside_workspace"
    assert refusal(workspace, "..") == "path_outside_workspace"


def test_absolute_path_outside_the_workspace_is_refused(workspace):
    assert refusal(workspace, "/etc/passwd") == "path_outside_workspace"
    assert refusal(workspace, "/") == "path_outside_workspace"


def test_sibling_directory_sharing_the_name_prefix_is_refused(workspace):
    # A string prefix test would accept /tmp/.../ws-evil for the workspace /tmp/.../ws.
    evil = workspace.parent / (workspace.name + "-evil")
    evil.mkdir()
    (evil / "loot.txt").write_text("x")

    assert refusal(workspace, str(evil / "loot.txt")) == "path_outside_workspace"
    assert refusal(workspace, f"../{evil.name}/loot.txt") == "path_outside_workspace"


def test_symlinked_file_leading_outside_is_refused(workspace, outside):
    (workspace / "innocent.txt").symlink_to(outside / "secret.txt")

    assert refusal(workspace, "innocent.txt") == "path_outside_workspace"
    assert refusal(workspace, "innocent.txt", write=True) == "path_outside_workspace"


def test_symlinked_parent_directory_escape_is_refused(workspace, outside):
    (workspace / "docs").symlink_to(outside, target_is_directory=True)

    assert refusal(workspace, "docs/secret.txt") == "path_outside_workspace"
    # a file that does not exist yet, below the link, is refused too: create must not escape
    assert refusal(workspace, "docs/new.txt", write=True) == "path_outside_workspace"
    assert refusal(workspace, "docs/sub/deeper/new.txt", write=True) == "path_outside_workspace"


def test_dangling_symlink_pointing_outside_is_refused(workspace, outside):
    (workspace / "planted.txt").symlink_to(outside / "not-yet-there.txt")

    assert refusal(workspace, "planted.txt", write=True) == "path_outside_workspace"


def test_symlink_that_stays_inside_the_workspace_is_followed(workspace):
    (workspace / "real").mkdir()
    (workspace / "real" / "a.txt").write_text("hello\n")
    (workspace / "alias").symlink_to(workspace / "real", target_is_directory=True)

    resolved = resolve_path(workspace, "alias/a.txt")

    assert resolved.path == workspace / "real" / "a.txt"
    assert resolved.shown == "real/a.txt"


def test_symlink_loop_is_refused_without_an_exception(workspace):
    (workspace / "a").symlink_to(workspace / "b")
    (workspace / "b").symlink_to(workspace / "a")

    assert refusal(workspace, "a/x.txt") in {"invalid_path", "path_outside_workspace"}


def test_fifo_is_refused(workspace):
    os.mkfifo(workspace / "pipe")

    assert refusal(workspace, "pipe") == "path_special_file"


def test_socket_file_is_refused():
    # AF_UNIX paths are limited to ~100 bytes, so use a short workspace directly under /tmp
    root = Path(tempfile.mkdtemp(prefix="ak-", dir=os.path.realpath("/tmp")))
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "s"))
        assert refusal(root, "s") == "path_special_file"
    finally:
        server.close()
        (root / "s").unlink()
        root.rmdir()


def test_writes_under_git_are_refused_and_reads_are_not(workspace):
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (workspace / "gitdir").symlink_to(workspace / ".git", target_is_directory=True)

    assert refusal(workspace, ".git/HEAD", write=True) == "path_protected"
    assert refusal(workspace, ".git/hooks/pre-commit", write=True) == "path_protected"
    assert refusal(workspace, "vendor/lib/.git/config", write=True) == "path_protected"
    assert refusal(workspace, "gitdir/HEAD", write=True) == "path_protected"
    assert resolve_path(workspace, ".git/HEAD").shown == ".git/HEAD"


def test_empty_and_nul_paths_are_refused(workspace):
    assert refusal(workspace, "") == "invalid_path"
    assert refusal(workspace, "   ") == "invalid_path"
    assert refusal(workspace, "a\x00b") == "invalid_path"


def test_missing_workspace_is_reported(tmp_path):
    assert refusal(tmp_path / "gone", "a.txt") == "workspace_missing"


def test_directory_swapped_for_a_symlink_after_the_check_is_not_followed(workspace, outside):
    """The check and the open are separate steps; the open walks down with O_NOFOLLOW, so a
    directory replaced by a link in between fails the open instead of leaking the target."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / "secret.txt").write_text("harmless\n")
    checked = resolve_path(workspace, "sub/secret.txt")
    (workspace / "sub" / "secret.txt").unlink()
    (workspace / "sub").rmdir()
    (workspace / "sub").symlink_to(outside, target_is_directory=True)

    with pytest.raises(PathRefusedError) as caught:
        read_bytes(checked)
    assert caught.value.error_code == "path_outside_workspace"
    with pytest.raises(PathRefusedError):
        write_bytes(checked, b"overwritten")
    assert (outside / "secret.txt").read_text() == SECRET


def test_file_swapped_for_a_symlink_after_the_check_is_not_followed(workspace, outside):
    (workspace / "notes.txt").write_text("mine\n")
    checked = resolve_path(workspace, "notes.txt", write=True)
    (workspace / "notes.txt").unlink()
    (workspace / "notes.txt").symlink_to(outside / "secret.txt")

    with pytest.raises(PathRefusedError) as caught:
        read_bytes(checked)
    assert caught.value.error_code == "path_outside_workspace"
    write_bytes(checked, b"replaced\n")  # replaces the link itself, never writes through it

    assert (outside / "secret.txt").read_text() == SECRET
    assert not (workspace / "notes.txt").is_symlink()
    assert (workspace / "notes.txt").read_text() == "replaced\n"


def test_write_keeps_permission_bits_and_creates_parents(workspace):
    script = workspace / "run.sh"
    script.write_text("echo 1\n")
    script.chmod(0o755)

    write_bytes(resolve_path(workspace, "run.sh", write=True), b"echo 2\n")
    created = write_bytes(resolve_path(workspace, "a/b/c.txt", write=True), b"x")

    umask = os.umask(0o022)
    os.umask(umask)
    assert script.stat().st_mode & 0o777 == 0o755
    assert (workspace / "a" / "b" / "c.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    assert script.read_text() == "echo 2\n"
    assert created == ["a", "a/b"]
    assert (workspace / "a" / "b" / "c.txt").read_bytes() == b"x"
    assert not [p for p in workspace.rglob("*agentkit-tmp*")]  # no temp file left behind


def test_text_decoding_tells_binary_from_text():
    assert decode_text(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR") is None
    assert decode_text("héllo\n".encode()).encoding == "utf-8"
    assert decode_text("héllo\n".encode("latin-1")).encoding == "latin-1"
    utf16 = decode_text(b"\xff\xfe" + "hi\n".encode("utf-16-le"))
    assert utf16 is not None and utf16.text == "hi\n"
    assert utf16.encode(utf16.text) == b"\xff\xfe" + "hi\n".encode("utf-16-le")


# --- property: nothing accepted resolves outside ----------------------------------------------

SEGMENTS = [
    "..",
    ".",
    "",
    "a",
    "b",
    "file.txt",
    "link_out",
    "link_in",
    "link_up",
    "dangling",
    "loop",
    "ws-evil",
    "outside",
    "secret.txt",
    ".git",
    "~",
]


def _tree(base: Path) -> Path:
    root = base / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "file.txt").write_text("x")
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text(SECRET)
    (base / "ws-evil").mkdir()
    (root / "link_out").symlink_to(base / "outside", target_is_directory=True)
    (root / "a" / "link_in").symlink_to(root / "a" / "b", target_is_directory=True)
    (root / "a" / "b" / "link_up").symlink_to(base, target_is_directory=True)
    (root / "dangling").symlink_to(base / "outside" / "nothing")
    (root / "loop").symlink_to(root / "loop")
    return root


def _paths(root: Path) -> st.SearchStrategy[str]:
    relative = st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=7).map("/".join)
    prefixes = st.sampled_from(["", "/", str(root) + "/", str(root.parent) + "/", "./"])
    structured = st.tuples(prefixes, relative).map("".join)
    noise = st.text(alphabet=string.printable + "é/.\\~", max_size=40)
    return st.one_of(structured, structured, noise)


def test_no_accepted_path_resolves_outside_the_workspace(tmp_path_factory):
    root = _tree(tmp_path_factory.mktemp("prop"))
    real_root = Path(os.path.realpath(root))

    @settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
    @given(raw=_paths(root), write=st.booleans())
    def check(raw: str, write: bool) -> None:
        try:
            accepted = resolve_path(root, raw, write=write)
        except PathRefusedError as exc:
            assert exc.error_code  # a typed refusal, never another exception
            return
        # What the kernel would open for this path is inside the workspace ...
        kernel_view = Path(os.path.realpath(os.path.join(root, raw)))
        assert kernel_view == accepted.path
        assert kernel_view.is_relative_to(real_root)
        # ... and so is every existing ancestor of it.
        for ancestor in [accepted.path, *accepted.path.parents]:
            if ancestor == real_root:
                break
            assert ancestor.is_relative_to(real_root)
        if write:
            assert ".git" not in accepted.parts

    check()
