"""str_replace_editor's str_replace on real files (seed 000 U1): the exact-anchor replacement,
new_str written byte for byte, non-unique anchors and expected_count, and the hints given when
old_str is not found."""

from __future__ import annotations

from tests.tools.editor_support import edit

# --- replacing the anchor ---------------------------------------------------------------------


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


async def test_new_str_is_written_byte_for_byte(call, workspace):
    (workspace / "a.txt").write_text("<<here>>\n")
    new_str = "\n\t  indented with tab and spaces  \n\n trailing spaces   \n"

    result = await edit(
        call, command="str_replace", path="a.txt", old_str="<<here>>", new_str=new_str
    )

    assert result.ok
    assert (workspace / "a.txt").read_text() == new_str + "\n"


# --- non-unique anchors and expected_count ----------------------------------------------------


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


# --- anchor not found -------------------------------------------------------------------------


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
