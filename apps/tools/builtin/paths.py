"""Path safety and file access shared by every file tool.

A path the model gives is relative to the workspace root, or absolute inside it. It is accepted
only if it stays inside the workspace both as written (no `..` escape) and as the kernel would
resolve it (no symbolic link, of the file or of any parent, that leads outside):
`Path.resolve()` + `relative_to(resolved root)`, never a string prefix test, which would admit
`/work/ws-evil` for `/work/ws`. Device files, FIFOs and sockets are refused, and so are writes
under `.git/`.

The check happens again on every call, so a file swapped for a symbolic link between two calls is
refused on the second. Within one call, files are opened by walking from the workspace root one
directory at a time with O_NOFOLLOW (openat-style), so a component swapped for a link between the
check and the open makes the open fail instead of following the link.

Refusals raise PathRefusedError inside this module's helpers; tools turn it into a ToolResult error
with `.result()`, so the model sees e.g. `path_outside_workspace` and never an exception. A path
the OS cannot take (NUL, over-long names, undecodable text) is `invalid_path`, never a raw
OSError / ValueError.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from apps.engine.tools import ToolResult
from apps.tools.builtin.text import TextFile, decode_text

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_NAME_BYTES = 255  # NAME_MAX of Linux file systems
MAX_PATH_BYTES = 4_096  # PATH_MAX
PROTECTED_DIRS = frozenset({".git"})  # writes refused anywhere below a directory of this name

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefusedError(Exception):
    """A path or file a tool must not touch; `error_code` and a message that says what to do."""

    def __init__(self, error_code: str, message: str):
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    def result(self) -> ToolResult:
        return ToolResult.failure(self.error_code, self.message)


@dataclass(frozen=True)
class WorkspacePath:
    root: Path  # the resolved workspace root
    path: Path  # the resolved absolute path (no symbolic links left in it)
    shown: str  # posix path relative to the root, "." for the root: what messages show

    @property
    def parts(self) -> tuple[str, ...]:
        return self.path.relative_to(self.root).parts

    def exists(self) -> bool:
        return os.path.lexists(self.path)

    def is_dir(self) -> bool:
        return self.path.is_dir()


def resolve_path(root: Path | str, raw: object, *, write: bool = False) -> WorkspacePath:
    """Check `raw` against the workspace `root` and return where it really points.

    Raises PathRefusedError: invalid_path (empty, NUL, over-long, undecodable, a link loop, or
    anything else the OS cannot take as a path), path_outside_workspace, path_special_file,
    path_protected (write under .git/), workspace_missing. Never a raw OSError / ValueError.
    """
    if not isinstance(raw, str) or not raw.strip():
        raise PathRefusedError(
            "invalid_path",
            "path must be a non-empty string, relative to the workspace root (e.g. 'src/app.py').",
        )
    _check_path_text(raw)
    try:
        return _resolve(Path(root), raw, write)
    except (OSError, ValueError) as exc:  # what the OS refuses to take as a path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PathRefusedError(
            "invalid_path",
            f"{_quoted(raw)} cannot be used as a path ({reason}). {_PATH_ADVICE}",
        ) from None


_PATH_ADVICE = (
    "Use a path relative to the workspace root, e.g. 'src/app.py': UTF-8 text without NUL "
    f"characters, each name at most {MAX_NAME_BYTES} bytes, the whole at most {MAX_PATH_BYTES}."
)


def _quoted(raw: str) -> str:
    """The path as messages show it: repr, cut so a huge path cannot flood the output."""
    shown = repr(raw)
    return shown if len(shown) <= 120 else shown[:100] + f"…' ({len(raw)} characters)"


def _check_path_text(raw: str) -> None:
    if "\x00" in raw:
        raise PathRefusedError(
            "invalid_path", f"path must not contain NUL characters. {_PATH_ADVICE}"
        )
    try:
        encoded = os.fsencode(raw)
    except UnicodeError:
        raise PathRefusedError(
            "invalid_path", f"{_quoted(raw)} is not valid text for a file name. {_PATH_ADVICE}"
        ) from None
    if len(encoded) > MAX_PATH_BYTES:
        raise PathRefusedError("invalid_path", f"path is {len(encoded)} bytes long. {_PATH_ADVICE}")
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > MAX_NAME_BYTES:
        raise PathRefusedError(
            "invalid_path",
            f"{_quoted(raw)} has a name of {longest} bytes. {_PATH_ADVICE}",
        )


def _resolve(given_root: Path, raw: str, write: bool) -> WorkspacePath:
    try:
        real_root = given_root.resolve(strict=True)
    except (OSError, RuntimeError):
        raise PathRefusedError(
            "workspace_missing", f"the workspace directory {given_root} does not exist"
        ) from None
    candidate = Path(raw) if os.path.isabs(raw) else real_root / raw
    lexical = Path(os.path.normpath(candidate))
    if not (_is_within(lexical, real_root) or _is_within(lexical, given_root.absolute())):
        how = "is an absolute path outside" if os.path.isabs(raw) else "uses '..' to leave"
        raise PathRefusedError(
            "path_outside_workspace",
            f"{_quoted(raw)} {how} the workspace. Use a path relative to the workspace root "
            f"(e.g. 'src/app.py').",
        )
    loop = PathRefusedError(
        "invalid_path",
        f"{_quoted(raw)} goes through a symbolic link loop; use the path of a real file or "
        f"directory.",
    )
    try:
        resolved = candidate.resolve(strict=False)
    except RuntimeError:  # Python 3.11 reports a symlink loop this way
        raise loop from None
    try:  # resolve() treats a looping component as a name ('loop/..' -> root); the kernel does not
        os.stat(candidate)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise loop from None
    if not _is_within(resolved, real_root):
        raise PathRefusedError(
            "path_outside_workspace",
            f"{_quoted(raw)} leads outside the workspace through a symbolic link; only files "
            f"inside the workspace can be used.",
        )
    relative = resolved.relative_to(real_root)
    shown = relative.as_posix() if relative.parts else "."
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        mode = os.stat(resolved, follow_symlinks=False).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            raise PathRefusedError(
                "path_special_file",
                f"{shown} is a device, FIFO or socket, not a regular file; refusing to open it.",
            )
    if write and any(part.lower() in PROTECTED_DIRS for part in relative.parts):
        raise PathRefusedError(
            "path_protected",
            f"{shown} is inside .git/; the repository's internals are not edited by file tools.",
        )
    return WorkspacePath(root=real_root, path=resolved, shown=shown)


def _is_within(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


# --- race-resistant file access ----------------------------------------------------------------


@contextlib.contextmanager
def _parent_dir(wp: WorkspacePath, *, create: bool = False) -> Iterator[tuple[int, str, list[str]]]:
    """Open the file's parent directory by walking down from the root, one O_NOFOLLOW step at a
    time. Yields (directory fd, file name, directories created on the way as relative paths).
    Raises OSError: ELOOP when a directory was swapped for a link since resolve_path."""
    parts = wp.parts
    if not parts:
        raise PathRefusedError("is_a_directory", "the workspace root is a directory, not a file")
    created: list[str] = []
    fd = os.open(wp.root, _DIR_FLAGS)
    try:
        for index, part in enumerate(parts[:-1]):
            try:
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o777, dir_fd=fd)
                created.append("/".join(parts[: index + 1]))
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                # O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR (or ELOOP)
                if exc.errno in (errno.ENOTDIR, errno.ELOOP) and _is_link(part, fd):
                    raise OSError(errno.ELOOP, "a directory became a symbolic link") from None
                raise
            os.close(fd)
            fd = next_fd
        yield fd, parts[-1], created
    finally:
        os.close(fd)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _os_refusal(wp: WorkspacePath, exc: OSError, verb: str) -> PathRefusedError:
    if exc.errno == errno.ELOOP:  # a link appeared where resolve_path saw none
        return PathRefusedError(
            "path_outside_workspace",
            f"{wp.shown} changed into a symbolic link while being opened; refusing to follow it.",
        )
    if exc.errno == errno.ENOENT:
        return PathRefusedError(
            "file_not_found", f"{wp.shown} does not exist. Find files with search(glob=...)."
        )
    if exc.errno == errno.ENOTDIR:
        return PathRefusedError(
            "invalid_path",
            f"cannot {verb} {wp.shown}: one of its parents is a file; check the path with "
            f"search(glob=...).",
        )
    if exc.errno == errno.ENAMETOOLONG:
        return PathRefusedError("invalid_path", f"cannot {verb} {wp.shown}: {_PATH_ADVICE}")
    if exc.errno == errno.EISDIR:
        return PathRefusedError("is_a_directory", f"{wp.shown} is a directory")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return PathRefusedError("permission_denied", f"cannot {verb} {wp.shown}: permission denied")
    return PathRefusedError("io_error", f"cannot {verb} {wp.shown}: {exc.strerror or exc}")


def read_bytes(wp: WorkspacePath, *, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The file's bytes. Raises PathRefusedError (not found, directory, special, too large ...)."""
    try:
        with _parent_dir(wp) as (dir_fd, name, _):
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            with os.fdopen(os.open(name, flags, dir_fd=dir_fd), "rb") as handle:
                info = os.fstat(handle.fileno())
                if stat.S_ISDIR(info.st_mode):
                    raise PathRefusedError(
                        "is_a_directory",
                        f"{wp.shown} is a directory; list it with str_replace_editor view, or "
                        f"find files with search(glob=...).",
                    )
                if not stat.S_ISREG(info.st_mode):
                    raise PathRefusedError(
                        "path_special_file",
                        f"{wp.shown} is not a regular file; refusing to read it.",
                    )
                if info.st_size > max_bytes:
                    raise PathRefusedError(
                        "file_too_large",
                        f"{wp.shown} is {info.st_size / 1_048_576:.1f} MB, over the "
                        f"{max_bytes // 1_048_576} MB limit of reading and editing. search reads "
                        f"files of any size: use search(pattern=..., path='{wp.shown}') to find "
                        f"the lines you need in it.",
                    )
                return handle.read(max_bytes + 1)
    except OSError as exc:
        raise _os_refusal(wp, exc, "read") from None


def write_bytes(wp: WorkspacePath, data: bytes) -> list[str]:
    """Replace the file's content atomically (temp file + rename in the same directory), keeping
    its permission bits; parents are created. Returns the directories it created."""
    try:
        with _parent_dir(wp, create=True) as (dir_fd, name, created):
            keep_mode: int | None = None
            with contextlib.suppress(FileNotFoundError):
                info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    raise PathRefusedError("is_a_directory", f"{wp.shown} is a directory")
                if stat.S_ISREG(info.st_mode):
                    keep_mode = stat.S_IMODE(info.st_mode)
            temp = f".{name}.{secrets.token_hex(4)}.agentkit-tmp"
            # A new file gets 0o666 minus the umask, like any new file; a replaced one starts
            # private and gets its old mode back before it takes the old one's place.
            fd = os.open(
                temp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o666 if keep_mode is None else 0o600,
                dir_fd=dir_fd,
            )
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    if keep_mode is not None:
                        os.fchmod(handle.fileno(), keep_mode)
                # rename replaces a symbolic link that might have appeared; it never follows it
                os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=dir_fd)
                raise
            return created
    except OSError as exc:
        raise _os_refusal(wp, exc, "write") from None


def delete_file(wp: WorkspacePath, *, remove_dirs: tuple[str, ...] = ()) -> None:
    """Delete the file (never following a link), then the listed directories if they are empty
    (deepest first): undo of a create that also created parents."""
    try:
        with _parent_dir(wp) as (dir_fd, name, _):
            os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise _os_refusal(wp, exc, "delete") from None
    for relative in sorted(remove_dirs, key=lambda r: r.count("/"), reverse=True):
        with contextlib.suppress(OSError):
            target = WorkspacePath(wp.root, wp.root / relative, relative)
            with _parent_dir(target) as (dir_fd, name, _):
                os.rmdir(name, dir_fd=dir_fd)  # fails, and is skipped, if no longer empty


def read_text(wp: WorkspacePath) -> TextFile:
    return text_of(wp, read_bytes(wp))


def text_of(wp: WorkspacePath, data: bytes) -> TextFile:
    """The decoded text of a file's bytes; refuses binary content."""
    text = decode_text(data)
    if text is None:
        raise PathRefusedError(
            "binary_file",
            f"{wp.shown} is a binary file; file tools only read and edit text.",
        )
    return text
