"""Workspaces created from the chat page: from a server directory under
`workspaces.allowed_roots` (a git work tree there becomes a repository workspace:
repositories.py), cloned from a git URL, or from an uploaded .zip/.tar.gz; and the demo's reset.

An archive is checked member by member before anything is written: no absolute path, no `..`,
only regular files and directories (no symbolic or hard links, devices or FIFOs), at most
`upload_max_files` members and `upload_max_unpacked_mb` in total. The total is counted on the bytes
actually written, so a zip that understates its sizes still stops at the cap. A refused archive
leaves nothing behind."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from django.db import transaction

from apps.tasks.models import Task, TaskStatus, Workspace
from apps.tasks.services import ApplicationError, install_demo_project, workspace_create
from apps.tasks.workspaces.repositories import repository_base, workspace_clone

CHUNK = 64 * 1024


def _refuse(message: str, code: str = "invalid_workspace") -> ApplicationError:
    return ApplicationError(message, {"error_code": code})


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise _refuse("give the workspace a name", "missing_field")
    name = name.strip()
    if len(name) > 100 or not re.fullmatch(r"[\w.\- ]+", name):
        raise _refuse("a workspace name is up to 100 letters, digits, spaces, '.', '-' or '_'")
    if Workspace.objects.filter(name=name).exists():
        raise _refuse(f"a workspace named {name!r} exists already: choose another name", "exists")
    return name


def workspace_create_from_directory(*, user, name: object, directory: object, config) -> Workspace:
    roots = config.workspaces.allowed_roots
    if not roots:
        raise _refuse(
            "creating a workspace from a server directory is off: an admin lists the allowed "
            "directories under workspaces.allowed_roots in agentkit.yaml",
            "disabled",
        )
    name = _check_name(name)
    if not isinstance(directory, str) or not os.path.isabs(directory):
        raise _refuse("give the directory as an absolute path on the server", "invalid_field")
    real = Path(directory).resolve()
    allowed = [Path(root).resolve() for root in roots]
    if not any(real != root and real.is_relative_to(root) for root in allowed):
        raise _refuse(
            f"{directory} is not inside an allowed directory ({', '.join(roots)})", "not_allowed"
        )
    if not real.is_dir():
        raise _refuse(f"{directory} is not a directory on the server", "not_found")
    base = repository_base(real)  # a git work tree: a repository workspace (repositories.py)
    workspace = workspace_create(name=name, root_dir=real, members=[user])
    if base:
        Workspace.objects.filter(pk=workspace.pk).update(base_branch=base)
        workspace.base_branch = base
    return workspace


def workspace_create_from_git(
    *, user, name: object, git_url: object, branch: object, config, workspaces_dir: Path
) -> Workspace:
    """Clone a repository into a new workspace (repositories.workspace_clone)."""
    return workspace_clone(
        user=user,
        name=_check_name(name),
        git_url=git_url,
        branch=branch,
        config=config,
        workspaces_dir=workspaces_dir,
    )


# ── archives ────────────────────────────────────────────────────────────────────────────────────
def _member_path(raw: str) -> PurePosixPath:
    path = PurePosixPath(raw.replace("\\", "/"))
    if raw.startswith(("/", "\\")) or path.is_absolute() or re.match(r"^[A-Za-z]:", raw):
        raise _refuse(
            f"the archive holds an absolute path ({raw!r}); refusing it", "unsafe_archive"
        )
    if any(part == ".." for part in path.parts):
        raise _refuse(
            f"the archive holds a path with '..' ({raw!r}); refusing it", "unsafe_archive"
        )
    return path


def _copy_capped(source, target: Path, budget: list[int]) -> None:
    with open(target, "xb") as out:
        while chunk := source.read(CHUNK):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise _refuse("the archive unpacks to more than the size limit", "too_large")
            out.write(chunk)


def _unpack_zip(archive: Path, dest: Path, limits) -> None:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        _check_counts(len(infos), sum(i.file_size for i in infos), limits)
        budget = [limits.upload_max_unpacked_mb * 1024 * 1024]
        for info in infos:
            kind = stat.S_IFMT(info.external_attr >> 16)
            plain = not kind or kind in (stat.S_IFREG, stat.S_IFDIR)
            target = _member_target(info.filename, dest, plain=plain, directory=info.is_dir())
            if target is not None:
                with zf.open(info) as source:
                    _copy_capped(source, target, budget)


def _unpack_tar(archive: Path, dest: Path, limits) -> None:
    with tarfile.open(archive, "r:*") as tf:
        members = tf.getmembers()
        _check_counts(len(members), sum(m.size for m in members if m.isfile()), limits)
        budget = [limits.upload_max_unpacked_mb * 1024 * 1024]
        for member in members:
            plain = member.isfile() or member.isdir()
            target = _member_target(member.name, dest, plain=plain, directory=member.isdir())
            if target is None:
                continue
            source = tf.extractfile(member)
            if source is None:
                continue
            with source:
                _copy_capped(source, target, budget)


def _member_target(name: str, dest: Path, *, plain: bool, directory: bool) -> Path | None:
    """Where an archive member goes under `dest`: a directory is made there (None), a file's
    parent directories are made (its path); a link or special file (not `plain`) is refused."""
    path = _member_path(name)
    if not plain:
        raise _refuse(
            f"the archive holds a link or special file ({name!r}); only files and directories "
            "are accepted",
            "unsafe_archive",
        )
    target = dest.joinpath(*path.parts)
    if directory:
        target.mkdir(parents=True, exist_ok=True)
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _check_counts(count: int, declared: int, limits) -> None:
    if count > limits.upload_max_files:
        raise _refuse(
            f"the archive has {count} members; at most {limits.upload_max_files}", "too_large"
        )
    if declared > limits.upload_max_unpacked_mb * 1024 * 1024:
        raise _refuse(
            f"the archive unpacks to {declared // (1024 * 1024)} MB; at most "
            f"{limits.upload_max_unpacked_mb} MB",
            "too_large",
        )


def _single_top_dir(dest: Path) -> Path:
    """An archive of one folder (project/...) becomes that folder."""
    entries = list(dest.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink():
        return entries[0]
    return dest


def workspace_create_from_archive(
    *, user, name: object, filename: str, size: int, chunks, config, workspaces_dir: Path
) -> Workspace:
    """`chunks` yields the uploaded bytes (Django's UploadedFile.chunks())."""
    limits = config.workspaces
    name = _check_name(name)
    lower = filename.lower()
    if lower.endswith(".zip"):
        unpack = _unpack_zip
    elif lower.endswith((".tar.gz", ".tgz")):
        unpack = _unpack_tar
    else:
        raise _refuse("upload a .zip or a .tar.gz archive", "invalid_archive")
    if size > limits.upload_max_mb * 1024 * 1024:
        raise _refuse(f"the archive is over {limits.upload_max_mb} MB", "too_large")
    uploads = Path(workspaces_dir) / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^\w.-]+", "-", name).strip("-") or "workspace"
    dest = uploads / f"{slug}-{secrets.token_hex(4)}"
    archive = uploads / f".{dest.name}.upload"
    try:
        with open(archive, "xb") as out:
            written = 0
            for chunk in chunks:
                written += len(chunk)
                if written > limits.upload_max_mb * 1024 * 1024:
                    raise _refuse(f"the archive is over {limits.upload_max_mb} MB", "too_large")
                out.write(chunk)
        dest.mkdir()
        try:
            unpack(archive, dest, limits)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
            raise _refuse(f"the archive cannot be read: {exc}", "invalid_archive") from None
        return workspace_create(name=name, root_dir=_single_top_dir(dest), members=[user])
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        archive.unlink(missing_ok=True)


# ── the demo ────────────────────────────────────────────────────────────────────────────────────
@transaction.atomic
def workspace_reset_demo(*, user, demo_source: Path, workspaces_dir: Path) -> Workspace:
    """Copy the shipped demo project over the demo workspace again (`bootstrap --reset-demo`
    passes user=None). Refused while a task runs in it."""
    workspace = Workspace.objects.filter(name="demo").first()
    if workspace is None or (
        user is not None and not workspace.members.filter(pk=user.pk).exists()
    ):
        raise _refuse("there is no demo workspace: run 'python manage.py bootstrap'", "not_found")
    target = (Path(workspaces_dir) / "demo").resolve()
    if Path(workspace.root_dir).resolve() != target:
        raise _refuse(
            f"the demo workspace points at {workspace.root_dir}, not {target}; reset it by hand",
            "not_allowed",
        )
    if Task.objects.filter(workspace=workspace, status=TaskStatus.RUNNING).exists():
        raise _refuse("a task is running in the demo workspace: stop it first", "task_running")
    if not Path(demo_source).is_dir():
        raise _refuse(f"the demo project is missing at {demo_source}; restore it from git")
    shutil.rmtree(target, ignore_errors=True)
    install_demo_project(Path(demo_source), target)
    return workspace
