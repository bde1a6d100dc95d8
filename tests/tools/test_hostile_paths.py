"""Paths the OS cannot take (NUL bytes, over-long names and paths, text that is not valid for a
file name) come back from every file tool as a typed `invalid_path` error that says what to do,
never as a raw OSError / ValueError (which the ToolSet would report as `tool_execution_error`)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.engine.tools import ToolResult

HOSTILE_PATHS = {
    "nul byte": "src/a\x00b.py",
    "nul byte at the end": "a.py\x00",
    "name over 255 bytes": "x" * 300 + ".py",
    "directory name over 255 bytes": "d" * 256 + "/a.py",
    "multibyte name over 255 bytes": "é" * 200 + ".py",
    "path over 4096 bytes": "/".join(["d" * 200] * 30) + "/a.py",
    "lone surrogate": "\ud800.py",
    "surrogate pair halves": "src/\udbff\udfff\ud800/a.py",
}

# (tool, arguments) for each file tool, with the path left out
TOOL_CALLS = [
    ("read_file", {}),
    ("read_file", {"symbol": "main"}),
    ("search", {"pattern": "x"}),
    ("search", {"glob": "*.py"}),
    ("str_replace_editor", {"command": "view"}),
    ("str_replace_editor", {"command": "create", "file_text": "x = 1\n"}),
    ("str_replace_editor", {"command": "str_replace", "old_str": "a", "new_str": "b"}),
    ("str_replace_editor", {"command": "insert_at_line", "insert_line": 0, "new_str": "b"}),
    ("str_replace_editor", {"command": "undo_edit"}),
]


def _call_id(call: tuple[str, dict]) -> str:
    name, arguments = call
    return f"{name}-{arguments.get('command') or next(iter(arguments), 'path')}"


@pytest.mark.parametrize("tool_call", TOOL_CALLS, ids=_call_id)
@pytest.mark.parametrize("path", HOSTILE_PATHS.values(), ids=HOSTILE_PATHS.keys())
async def test_hostile_paths_are_a_typed_invalid_path_error_in_every_file_tool(
    call, workspace, tool_call, path
):
    (workspace / "a.py").write_text("def main():\n    pass\n")
    name, arguments = tool_call

    result = await call(name, path=path, **arguments)

    assert not result.ok
    assert result.error_code == "invalid_path", result.error
    assert "relative to the workspace root" in result.error  # says what to do
    assert len(result.error) < 1_000  # a huge path is not echoed back whole
    assert sorted(p.name for p in workspace.iterdir()) == ["a.py"]  # nothing was written


async def test_a_file_below_a_file_is_an_invalid_path_for_writes(call, workspace):
    (workspace / "a.py").write_text("x = 1\n")

    result = await call("str_replace_editor", command="create", path="a.py/b.py", file_text="")

    assert result.error_code == "invalid_path"
    assert "parents is a file" in result.error


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    path=st.text(
        alphabet=st.one_of(
            st.sampled_from(["/", ".", "\x00", "a", "é", " ", "\\", "*", "~"]),
            st.characters(),  # surrogates and control characters included
        ),
        min_size=1,
        max_size=40,
    )
    | st.builds(lambda n, c: c * n, st.integers(200, 5_000), st.sampled_from(["a", "é"])),
    tool_call=st.sampled_from(TOOL_CALLS),
)
def test_no_path_makes_a_file_tool_raise(toolset, workspace, path, tool_call):
    (workspace / "a.py").write_text("def main():\n    pass\n")
    name, arguments = tool_call

    result: ToolResult = asyncio.run(toolset.safe_execute(name, {"path": path, **arguments}))

    assert result.error_code != "tool_execution_error", result.error
    if not result.ok:
        assert result.error
