"""`manage.py call_tool` as a real subprocess: JSON result on stdout, exit 0 even when the tool
reports an error, a clear CommandError (non-zero exit) for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from tests.support import ROOT


def call_tool(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "call_tool", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_call_tool_runs_the_tool_and_prints_its_result_as_json(workspace):
    (workspace / "app.py").write_text("class App:\n    def run(self):\n        return 'ünï'\n")

    done = call_tool(
        "read_file", "--workspace", str(workspace), "--args", '{"path": "app.py", "symbol": "run"}'
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"ok", "output", "error", "error_code", "data"}
    assert result["ok"] is True
    assert "2\t    def run(self):" in result["output"]
    assert "ünï" in result["output"]
    assert result["data"]["symbol"]["name"] == "App.run"


def test_call_tool_edits_files_in_the_workspace(workspace):
    arguments = json.dumps({"command": "create", "path": "new/file.txt", "file_text": "hi\n"})

    done = call_tool("str_replace_editor", "--workspace", str(workspace), "--args", arguments)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] is True
    assert (workspace / "new" / "file.txt").read_text() == "hi\n"


def test_call_tool_exits_zero_when_the_tool_reports_an_error(workspace):
    done = call_tool(
        "read_file", "--workspace", str(workspace), "--args", '{"path": "/etc/passwd"}'
    )

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] is False
    assert result["error_code"] == "path_outside_workspace"
    assert "root:" not in result["output"]


def test_call_tool_rejects_bad_input_with_a_clear_message(workspace, tmp_path):
    with ThreadPoolExecutor(3) as pool:  # three Django start-ups at once keep the suite quick
        bad_json, unknown, missing = pool.map(
            lambda arguments: call_tool(*arguments),
            [
                ("read_file", "--workspace", str(workspace), "--args", "{path: x}"),
                ("write_file", "--workspace", str(workspace), "--args", "{}"),
                ("read_file", "--workspace", str(tmp_path / "nope"), "--args", "{}"),
            ],
        )

    assert bad_json.returncode != 0 and "--args is not valid JSON" in bad_json.stderr
    assert unknown.returncode != 0 and "unknown tool 'write_file'" in unknown.stderr
    assert "read_file" in unknown.stderr  # lists what exists
    assert missing.returncode != 0 and "is not a directory" in missing.stderr
    assert bad_json.stdout == unknown.stdout == missing.stdout == ""
