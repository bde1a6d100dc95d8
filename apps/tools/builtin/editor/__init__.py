"""`str_replace_editor`: view, create and edit files inside the workspace.

Edits are anchored on exact text, because line numbers go stale the moment a file changes:
`str_replace` replaces `old_str` only when it occurs exactly once (or exactly `expected_count`
times), and when it does not, the error says why in a way the model can act on: the line numbers
of every match, the closest lines ("did you mean"), a whitespace difference, or line numbers pasted
from view output. `new_str` is written byte-for-byte.

The file keeps its encoding, BOM and line endings (a CRLF file is edited as text with "\\n" and
written back with CRLF). Binary files and files over 10 MB are refused. After an edit of a Python
file, the problems `ruff check` finds in the new content but not in the old are reported.

The instance holds each file's undo history, so a run uses one instance: `undo_edit` restores the
content before the last edit of that file by this tool, repeatedly, a `create` included.

Layout: `tool` (arguments, create / str_replace / insert_at_line), `view` (files and
directories), `undo` (per-file history), `mismatch` (why an anchor did not match), `lint` (ruff
delta after Python edits), `diff` (unified diff for people).
"""

from apps.tools.builtin.editor.diff import unified_diff
from apps.tools.builtin.editor.lint import find_ruff, lint_delta
from apps.tools.builtin.editor.tool import StrReplaceEditorTool

__all__ = ["StrReplaceEditorTool", "find_ruff", "lint_delta", "unified_diff"]
