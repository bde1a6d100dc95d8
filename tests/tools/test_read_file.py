"""read_file on real files without a symbol or with a line range (seed 002 U1): full-file reads,
line-number padding, start_line / end_line slices and their errors, and the windowing of large
files and classes. Symbols and error paths have their own test_read_file_*.py modules."""

from __future__ import annotations

from tests.tools.conftest import numbered_text
from tests.tools.read_file_support import PYTHON, read

# --- full-file reads --------------------------------------------------------------------------


async def test_without_symbol_the_whole_file_is_returned(call, python_file):
    result = await read(call, path=python_file)

    assert result.ok
    assert numbered_text(result.output) == PYTHON.rstrip("\n")
    assert result.data["windowed"] is False
    assert result.data["lines"] == [1, PYTHON.count("\n")]
    assert result.output.startswith(f"[{python_file}: all {PYTHON.count(chr(10))} lines]\n")


async def test_line_numbers_are_padded_only_to_the_widest_number_shown(call, workspace):
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 13)))

    short = await read(call, path="n.txt", start_line=8, end_line=9)
    wide = await read(call, path="n.txt", start_line=9, end_line=10)

    assert short.output.splitlines()[1:] == ["8\tline 8", "9\tline 9"]
    assert wide.output.splitlines()[1:] == [" 9\tline 9", "10\tline 10"]
    assert wide.output.splitlines()[0] == "[n.txt: lines 9-10 of 12]"


async def test_empty_file_returns_empty_content(call, workspace):
    (workspace / "empty.py").write_text("")

    result = await read(call, path="empty.py")

    assert result.ok
    assert numbered_text(result.output) == ""
    assert result.data["total_lines"] == 0


# --- line ranges ------------------------------------------------------------------------------


async def test_end_line_truncates_a_symbol(call, python_file):
    result = await read(call, path=python_file, symbol="Cart", end_line=9)

    assert numbered_text(result.output) == (
        '# Shopping cart.\n# Keeps items in memory.\nclass Cart:\n    """A cart."""'
    )


async def test_start_and_end_line_slice_a_whole_file(call, python_file):
    result = await read(call, path=python_file, start_line=3, end_line=3)

    assert result.output.splitlines()[1:] == ["3\timport functools"]


async def test_range_outside_the_symbol_is_an_error(call, python_file):
    result = await read(call, path=python_file, symbol="my_func", start_line=1, end_line=5)
    reversed_range = await read(call, path=python_file, start_line=9, end_line=3)

    assert result.error_code == "line_out_of_range"
    assert "lines 25-26" in result.error
    assert reversed_range.error_code == "invalid_line_range"


# --- large files ------------------------------------------------------------------------------


async def test_large_file_is_windowed_with_a_note_naming_its_definitions(call, workspace):
    source = "".join(f"def function_{i}():\n    return {i}\n\n\n" for i in range(1500))
    (workspace / "big.py").write_text(source)

    result = await read(call, path="big.py")

    assert result.ok
    assert result.data["windowed"] is True
    last = result.data["lines"][1]
    assert f"Continue with start_line={last + 1}" in result.output
    assert "function_0 (function, lines 1-2)" in result.output
    assert len(result.output) < 10_000
    following = await read(call, path="big.py", start_line=last + 1)
    assert following.data["lines"][0] == last + 1


async def test_large_class_is_windowed_and_lists_its_methods(call, workspace):
    methods = "".join(f"    def method_{i}(self):\n        return {i}\n\n" for i in range(800))
    (workspace / "big.py").write_text(f"class Big:\n{methods}")

    result = await read(call, path="big.py", symbol="Big")

    assert result.data["windowed"] is True
    assert "read one member: Big.method_0 (method, lines 2-3)" in result.output
