"""Undo history of str_replace_editor: per file, the bytes before and after each edit by this
tool instance (a run uses one instance), so `undo_edit` can step back repeatedly."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from apps.engine.tools import ToolResult
from apps.tools.builtin.paths import (
    PathRefusedError,
    WorkspacePath,
    delete_file,
    read_bytes,
    write_bytes,
)

UNDO_DEPTH = 20


@dataclass(frozen=True)
class Snapshot:
    command: str
    before: bytes | None  # None: the file did not exist
    after: bytes
    created_dirs: tuple[str, ...]


class UndoHistory:
    def __init__(self) -> None:
        self._history: dict[Path, list[Snapshot]] = {}

    def remember(
        self,
        wp: WorkspacePath,
        command: str,
        before: bytes | None,
        after: bytes,
        created_dirs: tuple[str, ...],
    ) -> None:
        history = self._history.setdefault(wp.path, [])
        history.append(Snapshot(command, before, after, created_dirs))
        del history[:-UNDO_DEPTH]

    def undo(self, wp: WorkspacePath) -> ToolResult:
        """Restore the content before the last remembered edit of the file (delete a created
        file and the directories its create made)."""
        history = self._history.get(wp.path)
        if not history:
            return ToolResult.failure(
                "no_edit_history",
                f"there is no edit of {wp.shown} by str_replace_editor to undo (undo_edit only "
                f"reverts this tool's own edits in this run).",
            )
        snapshot = history[-1]
        warning = ""
        try:
            current = read_bytes(wp)
        except PathRefusedError:
            current = None
        if current != snapshot.after:
            warning = (
                " Note: the file had been changed since that edit by something else; those "
                "changes are gone too."
            )
        if snapshot.before is None:
            delete_file(wp, remove_dirs=snapshot.created_dirs)
            what = f"Removed {wp.shown}, which the undone create had made."
        else:
            write_bytes(wp, snapshot.before)
            what = f"Restored {wp.shown} to its content before the last {snapshot.command}."
        history.pop()  # only once the file is restored: a failed undo can be retried
        left = len(history)
        more = (
            f" {left} earlier edit{'s' if left != 1 else ''} of it can still be undone."
            if left
            else ""
        )
        return ToolResult.success(
            what + more + warning, path=wp.shown, undone=snapshot.command, undo_left=left
        )

    # --- shared ----------------------------------------------------------------------------
