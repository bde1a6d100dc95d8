"""str_replace_editor's undo_edit: after each command (create, create with overwrite, str_replace,
insert_at_line, view, undo), its history per file and per tool instance."""

from __future__ import annotations

from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.editor import StrReplaceEditorTool
from tests.tools.editor_support import edit

# --- undo_edit after each command -------------------------------------------------------------


async def test_undo_after_create_removes_the_file_and_the_directories_it_made(call, workspace):
    await edit(call, command="create", path="new/dir/file.txt", file_text="x\n")

    result = await edit(call, command="undo_edit", path="new/dir/file.txt")

    assert result.ok, result.error
    assert not (workspace / "new").exists()


async def test_undo_after_create_with_overwrite_restores_the_old_content(call, workspace):
    (workspace / "a.txt").write_bytes(b"old\n")
    await edit(call, command="create", path="a.txt", file_text="new\n", overwrite=True)

    await edit(call, command="undo_edit", path="a.txt")

    assert (workspace / "a.txt").read_bytes() == b"old\n"


async def test_undo_after_str_replace_restores_the_exact_bytes(call, workspace):
    original = b"keep  this\t\nand this\n"
    (workspace / "a.txt").write_bytes(original)
    await edit(call, command="str_replace", path="a.txt", old_str="and this", new_str="changed")

    await edit(call, command="undo_edit", path="a.txt")

    assert (workspace / "a.txt").read_bytes() == original


async def test_undo_after_insert_at_line_restores_the_file(call, workspace):
    (workspace / "a.txt").write_bytes(b"1\n2\n")
    await edit(call, command="insert_at_line", path="a.txt", insert_line=1, new_str="1.5")

    await edit(call, command="undo_edit", path="a.txt")

    assert (workspace / "a.txt").read_bytes() == b"1\n2\n"


async def test_undo_after_view_undoes_the_edit_before_it(call, workspace):
    (workspace / "a.txt").write_bytes(b"a\n")
    await edit(call, command="str_replace", path="a.txt", old_str="a", new_str="b")
    await edit(call, command="view", path="a.txt")

    result = await edit(call, command="undo_edit", path="a.txt")

    assert result.data["undone"] == "str_replace"
    assert (workspace / "a.txt").read_bytes() == b"a\n"


async def test_undo_after_undo_steps_further_back_until_nothing_is_left(call, workspace):
    await edit(call, command="create", path="a.txt", file_text="v1\n")
    await edit(call, command="str_replace", path="a.txt", old_str="v1", new_str="v2")
    await edit(call, command="str_replace", path="a.txt", old_str="v2", new_str="v3")

    steps = [await edit(call, command="undo_edit", path="a.txt") for _ in range(4)]

    assert [s.data.get("undone") for s in steps[:3]] == ["str_replace", "str_replace", "create"]
    assert not (workspace / "a.txt").exists()
    assert steps[3].error_code == "no_edit_history"


# --- undo history -----------------------------------------------------------------------------


async def test_undo_history_is_per_file(call, workspace):
    (workspace / "a.txt").write_text("a\n")
    (workspace / "b.txt").write_text("b\n")
    await edit(call, command="str_replace", path="a.txt", old_str="a", new_str="A")
    await edit(call, command="str_replace", path="b.txt", old_str="b", new_str="B")

    await edit(call, command="undo_edit", path="a.txt")

    assert (workspace / "a.txt").read_text() == "a\n"
    assert (workspace / "b.txt").read_text() == "B\n"


async def test_undo_of_an_untouched_file_is_refused(call, workspace):
    (workspace / "a.txt").write_text("a\n")

    result = await edit(call, command="undo_edit", path="a.txt")

    assert result.error_code == "no_edit_history"
    assert (workspace / "a.txt").read_text() == "a\n"


async def test_each_tool_instance_keeps_its_own_undo_history(workspace):
    (workspace / "a.txt").write_text("a\n")
    first = StrReplaceEditorTool(ToolContext(root=workspace))
    second = StrReplaceEditorTool(ToolContext(root=workspace))
    await first.execute(command="str_replace", path="a.txt", old_str="a", new_str="b")

    refused = await second.execute(command="undo_edit", path="a.txt")
    undone = await first.execute(command="undo_edit", path="a.txt")

    assert refused.error_code == "no_edit_history"
    assert undone.ok and (workspace / "a.txt").read_text() == "a\n"
