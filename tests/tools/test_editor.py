"""str_replace_editor on real files, its basic commands (seed 000 U1): view and create,
insert_at_line, argument checking, the lint delta after an edit, and the integration with the
tool registry and the engine's ToolSet. str_replace, path safety, undo and encodings each have
their own test_editor_*.py module."""

from __future__ import annotations

import json

from apps.engine.config import KNOWN_TOOLS
from apps.engine.tools import ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools
from tests.tools.conftest import numbered_text
from tests.tools.editor_support import edit

# --- view and create --------------------------------------------------------------------------


async def test_create_writes_a_new_file_and_its_parent_directories(call, workspace):
    result = await edit(call, command="create", path="pkg/sub/mod.txt", file_text="one\ntwo\n")

    assert result.ok, result.error
    assert (workspace / "pkg" / "sub" / "mod.txt").read_text() == "one\ntwo\n"
    assert "Created pkg/sub/mod.txt (2 lines)" in result.output


async def test_view_shows_the_file_with_line_numbers(call, workspace):
    (workspace / "a.py").write_text("import os\n\nprint(os.name)\n")

    result = await edit(call, command="view", path="a.py")

    assert result.ok
    assert result.output.splitlines() == [
        "1\timport os",
        "2\t",
        "3\tprint(os.name)",
    ]


async def test_create_of_an_empty_file(call, workspace):
    result = await edit(call, command="create", path="empty.txt", file_text="")

    assert result.ok, result.error
    assert (workspace / "empty.txt").read_bytes() == b""
    view = await edit(call, command="view", path="empty.txt")
    assert view.ok and "empty" in view.output


async def test_create_refuses_an_existing_file_unless_overwrite(call, workspace):
    (workspace / "keep.txt").write_text("precious\n")

    refused = await edit(call, command="create", path="keep.txt", file_text="new\n")
    assert not refused.ok and refused.error_code == "file_exists"
    assert "overwrite" in refused.error
    assert (workspace / "keep.txt").read_text() == "precious\n"

    replaced = await edit(
        call, command="create", path="keep.txt", file_text="new\n", overwrite=True
    )
    assert replaced.ok
    assert (workspace / "keep.txt").read_text() == "new\n"


async def test_view_with_a_line_range(call, workspace):
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 21)))

    middle = await edit(call, command="view", path="n.txt", view_range=[5, 7])
    to_end = await edit(call, command="view", path="n.txt", view_range=[19, -1])
    wrong = await edit(call, command="view", path="n.txt", view_range=[30, 40])

    assert numbered_text(middle.output) == "line 5\nline 6\nline 7"
    assert middle.output.startswith("5\t")
    assert numbered_text(to_end.output) == "line 19\nline 20"
    assert wrong.error_code == "invalid_view_range" and "20 lines" in wrong.error


async def test_view_of_a_large_file_is_windowed_with_a_note(call, workspace):
    (workspace / "big.py").write_text("".join(f"value_{i} = {i}\n" for i in range(5000)))

    result = await edit(call, command="view", path="big.py")

    assert result.ok
    assert result.data["windowed"] is True
    first, last = result.data["lines"]
    assert first == 1 and 100 < last < 5000
    assert f"Continue with view_range [{last + 1}, -1]" in result.output
    assert len(result.output) < 10_000


async def test_view_of_a_directory_lists_two_levels_without_hidden_files(call, workspace):
    (workspace / "src" / "pkg" / "deep").mkdir(parents=True)
    (workspace / "src" / "pkg" / "deep" / "x.py").write_text("")
    (workspace / "src" / "main.py").write_text("")
    (workspace / "README.md").write_text("")
    (workspace / ".env").write_text("SECRET=1")
    (workspace / ".cache").mkdir()

    result = await edit(call, command="view", path=".")

    assert result.ok
    listing = result.output.splitlines()[1:]
    assert listing == ["README.md", "src/", "  src/main.py", "  src/pkg/"]


# --- insert_at_line ---------------------------------------------------------------------------


async def test_insert_at_line_inserts_after_the_given_line(call, workspace):
    (workspace / "list.txt").write_text("a\nb\nc\n")

    result = await edit(call, command="insert_at_line", path="list.txt", insert_line=2, new_str="X")

    assert result.ok, result.error
    assert (workspace / "list.txt").read_text() == "a\nb\nX\nc\n"


async def test_insert_at_line_zero_inserts_at_the_top(call, workspace):
    (workspace / "a.py").write_text("print(1)\n")

    result = await edit(
        call, command="insert_at_line", path="a.py", insert_line=0, new_str="import os\n"
    )

    assert result.ok
    assert (workspace / "a.py").read_text() == "import os\nprint(1)\n"


async def test_insert_at_the_last_line_appends_and_beyond_it_is_refused_with_the_length(
    call, workspace
):
    (workspace / "a.txt").write_text("a\nb")  # no final newline

    appended = await edit(call, command="insert_at_line", path="a.txt", insert_line=2, new_str="c")
    beyond = await edit(call, command="insert_at_line", path="a.txt", insert_line=9, new_str="d")

    assert appended.ok
    assert (workspace / "a.txt").read_text() == "a\nb\nc"  # still without final newline
    assert beyond.error_code == "insert_line_out_of_range"
    assert "has 3 lines" in beyond.error and "0..3" in beyond.error


# --- arguments and missing files --------------------------------------------------------------


async def test_missing_or_unused_arguments_are_explained(call, workspace):
    (workspace / "a.txt").write_text("a\n")

    no_new_str = await edit(call, command="str_replace", path="a.txt", old_str="a")
    no_text = await edit(call, command="create", path="b.txt")
    stray = await edit(call, command="view", path="a.txt", old_str="a")
    bad_command = await edit(call, command="delete", path="a.txt")

    assert no_new_str.error_code == "invalid_arguments"
    assert "str_replace needs new_str" in no_new_str.error
    assert "create needs file_text" in no_text.error
    assert "view does not use old_str" in stray.error
    assert bad_command.error_code == "tool_call_invalid"  # rejected by the schema's enum


async def test_missing_file_is_reported(call):
    result = await edit(call, command="str_replace", path="nope.py", old_str="a", new_str="b")

    assert result.error_code == "file_not_found"


# --- lint delta -------------------------------------------------------------------------------


async def test_python_edit_reports_only_the_lint_errors_it_introduced(call, workspace):
    # `os` is unused before the edit: a pre-existing problem that must not be reported
    (workspace / "app.py").write_text("import os\n\n\ndef total(items):\n    return sum(items)\n")

    result = await edit(
        call,
        command="str_replace",
        path="app.py",
        old_str="    return sum(items)",
        new_str="    return sum(itemz)",
    )

    assert result.ok
    codes = [problem["code"] for problem in result.data["lint"]]
    assert codes == ["F821"]
    assert "app.py:5:16: F821" in result.output
    assert "F401" not in result.output


async def test_edit_that_breaks_python_syntax_is_reported(call, workspace):
    (workspace / "app.py").write_text("def f():\n    return 1\n")

    result = await edit(
        call, command="str_replace", path="app.py", old_str="return 1", new_str="return (1"
    )

    assert result.ok  # the edit happened; the model is told it broke the file
    assert result.data["lint"]
    assert "ruff: this edit introduced" in result.output


async def test_clean_python_edit_reports_no_lint_problems(call, workspace):
    (workspace / "app.py").write_text("import os\n\nprint(os.sep)\n")

    result = await edit(call, command="str_replace", path="app.py", old_str="os.sep", new_str="1")

    assert result.data["lint"] == [
        {"code": "F401", "line": 1, "column": 8, "message": "`os` imported but unused"}
    ]
    clean = await edit(
        call, command="insert_at_line", path="app.py", insert_line=3, new_str="x = 2"
    )
    assert clean.data["lint"] == []
    assert "ruff" not in clean.output


# --- integration ------------------------------------------------------------------------------


def test_file_tools_are_registered_and_offered_to_the_model(workspace):
    assert {"read_file", "search", "str_replace_editor"} <= set(available_tool_names())
    assert {"read_file", "search", "str_replace_editor"} <= set(KNOWN_TOOLS)
    assert "write_file" not in KNOWN_TOOLS

    specs = {spec.name: spec for spec in ToolSet(build_tools(ToolContext(root=workspace))).specs()}

    editor = specs["str_replace_editor"]
    assert editor.input_schema["additionalProperties"] is False
    assert editor.input_schema["properties"]["command"]["enum"] == [
        "view",
        "create",
        "str_replace",
        "insert_at_line",
        "undo_edit",
    ]
    assert specs["read_file"].input_schema["required"] == ["path"]
    assert "str_replace" in editor.description


async def test_model_style_json_arguments_return_a_structured_result(toolset, workspace):
    arguments = json.dumps({"command": "create", "path": "hello.py", "file_text": "print(1)\n"})

    result = await toolset.safe_execute("str_replace_editor", arguments)

    assert set(result.as_dict()) == {"ok", "output", "error", "error_code", "data"}
    assert result.ok and result.data["path"] == "hello.py"
    assert (workspace / "hello.py").read_text() == "print(1)\n"
    unknown = await toolset.safe_execute("str_replace_editor", {"command": "view", "file": "x"})
    assert unknown.error_code == "schema_mismatch"


async def test_edits_carry_a_unified_diff_for_people(tmp_path):
    from apps.tools.builtin.context import ToolContext
    from apps.tools.builtin.editor import StrReplaceEditorTool

    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    tool = StrReplaceEditorTool(ToolContext(root=tmp_path))
    result = await tool.execute(
        command="str_replace", path="m.py", old_str="return 1", new_str="return 2"
    )
    assert result.ok
    assert "-    return 1\n+    return 2\n" in result.data["diff"]
    assert result.data["diff"].startswith("--- a/m.py\n+++ b/m.py\n")
    created = await tool.execute(command="create", path="n.txt", file_text="hello\n")
    assert "+hello\n" in created.data["diff"]
    assert "diff" not in result.output  # the model sees the numbered snippet, not the diff
