"""str_replace_editor on real files: the seed 000 U1 scenarios (happy paths, edge cases, error
paths, integration) plus encodings, line endings, undo after every command and the lint delta."""

from __future__ import annotations

import json

import pytest

from apps.engine.config import KNOWN_TOOLS
from apps.engine.tools import ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.editor import StrReplaceEditorTool
from apps.tools.builtin.registry import available_tool_names, build_tools
from tests.tools.conftest import SECRET, numbered_text

EDIT = "str_replace_editor"


async def edit(call, **arguments):
    return await call(EDIT, **arguments)


# --- happy paths ----------------------------------------------------------------------------


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


async def test_str_replace_replaces_the_exact_anchor(call, workspace):
    (workspace / "a.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")

    result = await edit(
        call, command="str_replace", path="a.py", old_str="return 2", new_str="return 20"
    )

    assert result.ok, result.error
    assert (workspace / "a.py").read_text() == (
        "def f():\n    return 1\n\n\ndef g():\n    return 20\n"
    )
    assert "6\t    return 20" in result.output  # the edited lines are shown back
    assert result.data["lines"] == [6, 6]


async def test_insert_at_line_inserts_after_the_given_line(call, workspace):
    (workspace / "list.txt").write_text("a\nb\nc\n")

    result = await edit(call, command="insert_at_line", path="list.txt", insert_line=2, new_str="X")

    assert result.ok, result.error
    assert (workspace / "list.txt").read_text() == "a\nb\nX\nc\n"


# --- edge cases ------------------------------------------------------------------------------


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


async def test_non_unique_anchor_is_refused_with_every_line_number(call, workspace):
    original = "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n"
    (workspace / "a.py").write_text(original)

    result = await edit(call, command="str_replace", path="a.py", old_str="x = 1", new_str="x = 9")

    assert not result.ok
    assert result.error_code == "old_str_not_unique"
    assert "at lines 1, 3, 5" in result.error
    assert "expected_count=3" in result.error
    assert result.data["match_lines"] == [1, 3, 5]
    assert (workspace / "a.py").read_text() == original


async def test_many_matches_are_listed_compactly(call, workspace):
    (workspace / "a.txt").write_text("pass pass\n" + "pass\n" * 200)

    result = await edit(call, command="str_replace", path="a.txt", old_str="pass", new_str="ok")

    assert result.error_code == "old_str_not_unique"
    assert "occurs 202 times" in result.error
    assert "at lines 1×2, 2, 3," in result.error
    assert "... (161 more lines)" in result.error
    assert len(result.error) < 1_000


async def test_expected_count_replaces_every_occurrence_on_purpose(call, workspace):
    (workspace / "a.py").write_text("x = 1\ny = 2\nx = 1\n")

    result = await edit(
        call, command="str_replace", path="a.py", old_str="x = 1", new_str="x = 9", expected_count=2
    )

    assert result.ok, result.error
    assert (workspace / "a.py").read_text() == "x = 9\ny = 2\nx = 9\n"
    assert result.data["replacements"] == 2


async def test_expected_count_that_does_not_match_changes_nothing(call, workspace):
    (workspace / "a.py").write_text("x = 1\nx = 1\nx = 1\n")

    result = await edit(
        call, command="str_replace", path="a.py", old_str="x = 1", new_str="x = 9", expected_count=2
    )

    assert result.error_code == "old_str_count_mismatch"
    assert "3 times" in result.error and "not 2" in result.error
    assert (workspace / "a.py").read_text() == "x = 1\nx = 1\nx = 1\n"


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


# --- error paths ------------------------------------------------------------------------------


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


async def test_anchor_not_found_shows_the_closest_lines(call, workspace):
    (workspace / "a.py").write_text(
        "def load(path):\n    with open(path) as handle:\n        return handle.read()\n"
    )

    result = await edit(
        call,
        command="str_replace",
        path="a.py",
        old_str="    with open(path) as fh:\n        return fh.read()",
        new_str="    return ''",
    )

    assert result.error_code == "old_str_not_found"
    assert "Did you mean lines 2-3?" in result.error
    assert "2\t    with open(path) as handle:" in result.error
    assert "whitespace" in result.error


async def test_whitespace_only_difference_gets_a_whitespace_hint(call, workspace):
    (workspace / "Makefile").write_text("build:\n\tgo build ./...\n\ttouch done\n")

    result = await edit(
        call,
        command="str_replace",
        path="Makefile",
        old_str="build:\n    go build ./...",
        new_str="build:\n\tgo vet ./...",
    )

    assert result.error_code == "old_str_not_found"
    assert "matches lines 1-2 if whitespace is ignored" in result.error
    assert "tabs" in result.error
    assert (workspace / "Makefile").read_text() == "build:\n\tgo build ./...\n\ttouch done\n"


async def test_pasted_line_numbers_in_old_str_get_a_specific_hint(call, workspace):
    (workspace / "a.py").write_text("x = 1\ny = 2\nz = 3\n")
    viewed = await edit(call, command="view", path="a.py", view_range=[2, 3])

    result = await edit(
        call, command="str_replace", path="a.py", old_str=viewed.output, new_str="y = 20\nz = 30"
    )

    assert result.error_code == "old_str_not_found"
    assert "line numbers" in result.error
    assert "without them old_str matches exactly once, at line 2" in result.error


async def test_new_str_is_written_byte_for_byte(call, workspace):
    (workspace / "a.txt").write_text("<<here>>\n")
    new_str = "\n\t  indented with tab and spaces  \n\n trailing spaces   \n"

    result = await edit(
        call, command="str_replace", path="a.txt", old_str="<<here>>", new_str=new_str
    )

    assert result.ok
    assert (workspace / "a.txt").read_text() == new_str + "\n"


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


async def test_edits_under_git_are_refused(call, workspace):
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")

    result = await edit(call, command="create", path=".git/hooks/post-checkout", file_text="x")

    assert result.error_code == "path_protected"
    assert not (workspace / ".git" / "hooks").exists()


# --- file swapped for a symlink between two calls ------------------------------------------------


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


# --- encodings and line endings ---------------------------------------------------------------------


async def test_crlf_file_round_trips_unchanged(call, workspace):
    original = b"first line\r\nsecond line\r\nthird line\r\n"
    (workspace / "win.txt").write_bytes(original)

    replaced = await edit(
        call,
        command="str_replace",
        path="win.txt",
        old_str="second line\nthird",
        new_str="2nd line\n3rd",
    )
    assert replaced.ok, replaced.error
    assert (workspace / "win.txt").read_bytes() == b"first line\r\n2nd line\r\n3rd line\r\n"

    inserted = await edit(
        call, command="insert_at_line", path="win.txt", insert_line=1, new_str="a\nb"
    )
    assert inserted.ok
    assert (workspace / "win.txt").read_bytes() == (
        b"first line\r\na\r\nb\r\n2nd line\r\n3rd line\r\n"
    )

    await edit(call, command="undo_edit", path="win.txt")
    await edit(call, command="undo_edit", path="win.txt")
    assert (workspace / "win.txt").read_bytes() == original


async def test_lf_file_stays_lf_when_the_model_sends_crlf(call, workspace):
    (workspace / "unix.txt").write_bytes(b"a\nb\n")

    replaced = await edit(
        call, command="str_replace", path="unix.txt", old_str="a\r\nb", new_str="x\r\ny"
    )
    inserted = await edit(
        call, command="insert_at_line", path="unix.txt", insert_line=0, new_str="0\r\n"
    )

    assert replaced.ok and inserted.ok
    assert (workspace / "unix.txt").read_bytes() == b"0\nx\ny\n"


async def test_crlf_is_kept_when_a_file_is_overwritten(call, workspace):
    (workspace / "win.txt").write_bytes(b"a\r\nb\r\n")

    await edit(call, command="create", path="win.txt", file_text="c\nd\n", overwrite=True)

    assert (workspace / "win.txt").read_bytes() == b"c\r\nd\r\n"


async def test_unicode_file_round_trips_unchanged(call, workspace):
    original = "# -*- coding: utf-8 -*-\nnames = ['Zoë', 'Łukasz', '李雷', '🚀']\nπ = 3.14159\n"
    (workspace / "u.py").write_text(original, encoding="utf-8")

    replaced = await edit(call, command="str_replace", path="u.py", old_str="'🚀'", new_str="'🛸'")
    assert replaced.ok
    assert (workspace / "u.py").read_text(encoding="utf-8") == original.replace("🚀", "🛸")
    untouched = original.encode("utf-8").split(b"\n")[2]
    assert (workspace / "u.py").read_bytes().split(b"\n")[2] == untouched

    await edit(call, command="undo_edit", path="u.py")
    assert (workspace / "u.py").read_bytes() == original.encode("utf-8")


async def test_utf8_bom_and_latin1_files_keep_their_encoding(call, workspace):
    (workspace / "bom.txt").write_bytes(b"\xef\xbb\xbfcaf\xc3\xa9\n")
    (workspace / "legacy.txt").write_bytes("façade\nnaïve\n".encode("latin-1"))

    bom = await edit(call, command="str_replace", path="bom.txt", old_str="café", new_str="thé")
    legacy = await edit(
        call, command="str_replace", path="legacy.txt", old_str="naïve", new_str="né"
    )
    euro = await edit(call, command="str_replace", path="legacy.txt", old_str="né", new_str="€")

    assert bom.ok and legacy.ok
    assert (workspace / "bom.txt").read_bytes() == b"\xef\xbb\xbfth\xc3\xa9\n"
    assert (workspace / "legacy.txt").read_bytes() == "façade\nné\n".encode("latin-1")
    assert euro.error_code == "encoding_error"


# --- undo_edit after each command ----------------------------------------------------------------


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


# --- lint delta ------------------------------------------------------------------------------------


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


# --- integration ------------------------------------------------------------------------------------


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


async def test_each_tool_instance_keeps_its_own_undo_history(workspace):
    (workspace / "a.txt").write_text("a\n")
    first = StrReplaceEditorTool(ToolContext(root=workspace))
    second = StrReplaceEditorTool(ToolContext(root=workspace))
    await first.execute(command="str_replace", path="a.txt", old_str="a", new_str="b")

    refused = await second.execute(command="undo_edit", path="a.txt")
    undone = await first.execute(command="undo_edit", path="a.txt")

    assert refused.error_code == "no_edit_history"
    assert undone.ok and (workspace / "a.txt").read_text() == "a\n"


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
