"""What a task changed in its workspace, and reverting it.

The editor's own undo history lives in the tool instance of one run and is gone when the run
ends, so the lasting record is the task's events: every successful `str_replace_editor` edit
carries its unified diff (`data.diff`), and an `undo_edit` the model made cancels the last edit of
that file. Reverting a file applies the task's diffs in reverse, newest first, and only when the
file still reads as the task left it (every hunk's new side matches exactly); a file changed since
is refused with a message, never overwritten; a file a later task of the workspace changed (its
edits are in the file now, even an identical one) is refused naming that task. Paths go through the tools' workspace path checks,
so a revert cannot leave the workspace or write under .git/.

A task on a repository workspace is read and reverted in its branch's worktree (worktrees.py):
only later turns on the same branch count as later editors, and a revert is committed on the
branch ("Revert …", with the task's trailer). Once the worktree is gone (merged, discarded or
expired) its Revert is refused: the branch's commits are the record then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from apps.tasks.models import FINAL_STATUSES, Task, TaskEvent
from apps.tasks.services import ApplicationError
from apps.tasks.vcs.worktrees import task_commit, task_root
from apps.tools.builtin.paths import (
    PathRefusedError,
    decode_text,
    delete_file,
    read_bytes,
    resolve_path,
    write_bytes,
)

EDITOR = "str_replace_editor"
CUT_MARK = "... diff cut at"
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchMismatch(Exception):
    """The file does not read as the diff expects."""


@dataclass
class FileChange:
    path: str
    created: bool = False  # the task's first edit of it created the file
    diffs: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not any(CUT_MARK in diff for diff in self.diffs)


def task_changes(*, task: Task) -> list[FileChange]:
    """The files the task created or edited, in the order first touched (undone edits left out)."""
    events = TaskEvent.objects.filter(task=task, type__in=("tool_call", "tool_result")).order_by(
        "seq"
    )
    commands: dict[str, str] = {}
    files: dict[str, FileChange] = {}
    for event in events:
        data = event.data or {}
        if data.get("name") != EDITOR:
            continue
        if event.type == "tool_call":
            commands[str(data.get("call_id"))] = str((data.get("arguments") or {}).get("command"))
            continue
        if data.get("ok") is False:
            continue
        extra = data.get("data") or {}
        path = extra.get("path")
        if not isinstance(path, str) or not path:
            continue
        command = commands.get(str(data.get("call_id")), "")
        change = files.get(path)
        if command == "undo_edit" or "undone" in extra:
            if change and change.diffs:
                change.diffs.pop()
                if not change.diffs:
                    change.created = False
            continue
        diff = extra.get("diff")
        if not isinstance(diff, str) or not diff:
            continue
        if change is None:
            change = files[path] = FileChange(path=path)
        if not change.diffs:
            change.created = command == "create" and str(data.get("output", "")).startswith(
                "Created "
            )
        change.diffs.append(diff)
    return [change for change in files.values() if change.diffs]


# ── patches ─────────────────────────────────────────────────────────────────────────────────────
def _hunks(diff: str) -> list[tuple[int, list[str], int, list[str]]]:
    """(old_start, old_lines, new_start, new_lines) per hunk; starts are 0-based indexes."""
    hunks = []
    current = None
    for line in diff.split("\n"):
        match = HUNK.match(line)
        if match:
            a, b, c, d = (int(g) if g is not None else 1 for g in match.groups())
            current = (a - 1 if b else a, [], c - 1 if d else c, [])
            hunks.append(current)
        elif current is None or line.startswith(("---", "+++")):
            continue
        elif line.startswith("-"):
            current[1].append(line[1:])
        elif line.startswith("+"):
            current[3].append(line[1:])
        elif line.startswith(" "):
            current[1].append(line[1:])
            current[3].append(line[1:])
    return hunks


def _apply(text: str, diff: str, *, reverse: bool) -> str:
    """Apply one unified diff (or undo it, `reverse`) to text with "\\n" line breaks; exact
    positions, no fuzz: any mismatch raises PatchMismatch."""
    ends_with_newline = text.endswith("\n") or not text
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if not text:
        lines = []
    for old_start, old, new_start, new in reversed(_hunks(diff)):
        start, expect, put = (new_start, new, old) if reverse else (old_start, old, new)
        if lines[start : start + len(expect)] != expect:
            raise PatchMismatch
        lines[start : start + len(expect)] = put
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if ends_with_newline else "")


@dataclass(frozen=True)
class FileState:
    state: str  # applied | reverted | changed_since | changed_later
    revertible: bool
    note: str = ""
    later_task: int | None = None  # changed_later: the task whose edits are in the file now


def _read(wp) -> tuple[str | None, object]:
    if not wp.exists():
        return None, None
    source = decode_text(read_bytes(wp))
    if source is None:
        raise PatchMismatch
    return source.text.replace("\r\n", "\n") if source.crlf else source.text, source


def _original(change: FileChange, text: str | None) -> str | None:
    """The file's content before the task, from its content now; None when the task created it."""
    if text is None:
        raise PatchMismatch
    for diff in reversed(change.diffs):
        text = _apply(text, diff, reverse=True)
    if change.created:
        if text != "":
            raise PatchMismatch
        return None
    return text


def file_state(*, task: Task, change: FileChange) -> FileState:
    """The file's state for this task; a later task of the workspace whose edits of the file are
    in it now owns those lines (even an identical edit): this task's Revert names that task."""
    own = _own_state(task=task, change=change)
    if own.state == "reverted":
        return own
    later = later_editor(task=task, path=change.path)
    if later is None:
        return own
    return FileState(
        "changed_later",
        False,
        f"task #{later} changed this file after this task: revert task #{later} first, or "
        "revert by hand.",
        later,
    )


def later_editor(*, task: Task, path: str) -> int | None:
    """The newest later task of the workspace whose edits of `path` are in the file now."""
    later_ids = set(
        TaskEvent.objects.filter(
            task__workspace_id=task.workspace_id,
            task_id__gt=task.pk,
            type="tool_result",
            data__name=EDITOR,
            task__branch=task.branch,  # a repository task: only later turns on its branch
        ).values_list("task_id", flat=True)
    )
    for later_id in sorted(later_ids, reverse=True):
        later = Task.objects.select_related("workspace").get(pk=later_id)
        for change in task_changes(task=later):
            if change.path == path and _own_state(task=later, change=change).state == "applied":
                return later_id
    return None


def _own_state(*, task: Task, change: FileChange) -> FileState:
    if not change.complete:
        return FileState("applied", False, "The diff was too large to keep whole: revert by hand.")
    try:
        wp = resolve_path(task_root(task), change.path, write=True)
        text, _ = _read(wp)
        try:
            _original(change, text)
            return FileState("applied", True)
        except PatchMismatch:
            pass
        if text is None and change.created:
            return FileState("reverted", False)
        if text is not None:
            for diff in change.diffs:
                text = _apply(text, diff, reverse=False)
            return FileState("reverted", False)
    except (PatchMismatch, PathRefusedError):
        pass
    return FileState(
        "changed_since", False, "The file was changed after this task: revert it by hand."
    )


def changes_payload(*, task: Task) -> list[dict]:
    out = []
    for change in task_changes(task=task):
        state = file_state(task=task, change=change)
        out.append(
            {
                "path": change.path,
                "created": change.created,
                "edits": len(change.diffs),
                "diff": "".join(change.diffs),
                "state": state.state,
                "revertible": state.revertible,
                "note": state.note,
                "later_task": state.later_task,
            }
        )
    return out


def task_revert(*, user, task: Task, path: str | None = None) -> list[str]:
    """Put back what the task changed: one file (`path`) or all. Checks first, writes after: a
    refusal leaves every file as it was. Returns the reverted paths."""
    if not task.workspace.members.filter(pk=user.pk).exists():
        raise ApplicationError("task not found", {"error_code": "not_found"})
    if task.status not in FINAL_STATUSES:
        raise ApplicationError(
            "the task is still running: stop it (or wait for it to finish) before reverting",
            {"error_code": "task_running"},
        )
    if task.branch and not task.worktree:
        raise ApplicationError(
            f"the worktree of {task.branch} is gone (merged, discarded or expired): revert with "
            "git on the base branch, or send a follow-up task",
            {"error_code": "cannot_revert"},
        )
    changes = task_changes(task=task)
    if path is not None:
        changes = [c for c in changes if c.path == path]
        if not changes:
            raise ApplicationError(
                f"task #{task.pk} did not change {path!r}", {"error_code": "not_found"}
            )
    plans = []
    for change in changes:
        state = file_state(task=task, change=change)
        if state.state == "reverted" and path is None:
            continue
        if not state.revertible:
            raise ApplicationError(
                f"{change.path}: {state.note or 'already reverted'}",
                {"error_code": "cannot_revert"},
            )
        wp = resolve_path(task_root(task), change.path, write=True)
        text, source = _read(wp)
        plans.append((change, wp, _original(change, text), source))
    for _change, wp, original, source in plans:
        if original is None:
            delete_file(wp)
        else:
            if source.crlf:
                original = original.replace("\n", "\r\n")
            write_bytes(wp, source.encode(original))
    reverted = [change.path for change, *_ in plans]
    if task.branch and reverted:  # the revert is a commit on the task's branch
        from apps.tasks.conf import agent_config

        task_commit(task, f"Revert {', '.join(reverted)}", agent_config(), user=user)
    return reverted
