"""A batch file is read and checked before anything runs: every problem comes back at once,
each with its line (YAML node marks; JSONL lines)."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from apps.engine.config import load_config
from apps.tasks.batch.spec import SuiteError, load_suite
from tests.support import ROOT

CONFIG = load_config(ROOT / "agentkit.yaml")


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def problems(path, **options) -> list[tuple[int, str]]:
    with pytest.raises(SuiteError) as caught:
        load_suite(path, config=CONFIG, **options)
    return caught.value.errors


def test_yaml_file_reports_every_error_with_the_line_of_its_field(tmp_path):
    path = write(
        tmp_path,
        "suite.yaml",
        """
        tasks:
          - id: good
            goal: hello
          - id: "bad id!"
            goal: ""
          - id: two
            goal: fix it
            mode: nonsense
            source: ./missing
            skill: nope
            expect:
              status: done
              verification: maybe
          - id: good
            goal: again
            colour: red
        """,
    )
    found = problems(path)
    lines = [line for line, _ in found]
    assert lines == [4, 5, 8, 9, 10, 12, 13, 14, 16]
    text = "\n".join(message for _, message in found)
    assert "task 'two': mode: unknown mode 'nonsense'" in text
    assert "task 'two': source: source './missing' is not a directory" in text
    assert "task 'two': skill: unknown skill 'nope'; known: python_coder, writer" in text
    assert "expect.status: unknown status 'done'" in text
    assert "expect.verification: Input should be 'passed', 'failed' or 'not_run'" in text
    assert "task 'good': id already used on line 2" in text
    assert "colour: unknown field; known: id, goal, source" in text


def test_jsonl_file_reports_every_error_with_its_line(tmp_path):
    path = write(
        tmp_path,
        "suite.jsonl",
        """
        {"id": "a", "goal": "x"}
        {"id": "b", goal: }

        {"id": "c", "goal": "y", "mode": "rewoo"}
        [1, 2]
        {"id": "a", "goal": "z", "model": "nope"}
        """,
    )
    found = problems(path)
    assert [line for line, _ in found] == [2, 4, 5, 6, 6]
    messages = dict(found[:3])
    assert messages[2].startswith("not valid JSON: Expecting property name")
    assert "unknown mode 'rewoo'" in messages[4]
    assert "expected a mapping" in messages[5]
    text = "\n".join(message for _, message in found)
    assert "unknown model alias 'nope'" in text and "id already used on line 1" in text


def test_yaml_syntax_error_names_its_line(tmp_path):
    path = write(tmp_path, "suite.yaml", "tasks:\n  - id: a\n   goal: [\n")
    [(line, message)] = problems(path)
    assert line == 3 and message.startswith("not valid YAML")


def test_rendered_error_lists_file_line_and_says_nothing_ran(tmp_path):
    path = write(tmp_path, "suite.yaml", "tasks:\n  - id: a\n  - goal: b\n")
    with pytest.raises(SuiteError) as caught:
        load_suite(path, config=CONFIG)
    rendered = caught.value.render().splitlines()
    assert rendered[0] == f"2 problems in {path}; nothing was run:"
    assert rendered[1].startswith(f"{path}:2: task 'a': goal: Field required")
    assert rendered[2].startswith(f"{path}:3: task #2: id: Field required")


def test_defaults_apply_to_every_task_and_their_errors_point_at_the_defaults(tmp_path):
    (tmp_path / "src").mkdir()
    path = write(
        tmp_path,
        "suite.yaml",
        """
        defaults:
          source: src
          mode: plan_exec
          verification: ["pytest -q"]
        tasks:
          - {id: a, goal: one}
          - {id: b, goal: two, mode: react}
        """,
    )
    suite = load_suite(path, config=CONFIG)
    assert [(t.id, t.mode, t.source, t.verification) for t in suite.tasks] == [
        ("a", "plan_exec", (tmp_path / "src").resolve(), ("pytest -q",)),
        ("b", "react", (tmp_path / "src").resolve(), ("pytest -q",)),
    ]
    bad = write(tmp_path, "bad.yaml", "defaults:\n  mode: 3\ntasks:\n  - {id: a, goal: b}\n")
    assert problems(bad) == [(2, "defaults.mode: Input should be a valid string")]


def test_mode_and_model_options_override_the_file(tmp_path):
    path = write(tmp_path, "suite.yaml", "- {id: a, goal: b, mode: nonsense, model: nope}\n")
    assert len(problems(path)) == 2
    [task] = load_suite(path, config=CONFIG, mode_override="react", model_override="main").tasks
    assert (task.mode, task.model) == ("react", "main")


def test_a_git_source_must_hold_the_ref(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    subprocess.run([*git, "tag", "v1"], check=True)
    path = write(
        tmp_path,
        "suite.yaml",
        """
        - {id: ok, goal: g, source: repo, ref: v1}
        - {id: missing, goal: g, source: repo, ref: v9}
        - {id: plain, goal: g, ref: v1}
        """,
    )
    found = problems(path)
    assert [line for line, _ in found] == [2, 3]
    assert "ref 'v9' is not a commit, branch or tag" in found[0][1]
    assert "`ref` needs a `source`" in found[1][1]


def test_the_example_suite_is_valid():
    suite = load_suite(ROOT / "examples" / "suite.yaml", config=CONFIG)
    assert {task.mode for task in suite.tasks} == {
        "react",
        "plan_exec",
        "direct_chat",
        "team_collab",
    }
    assert all(task.expect is not None for task in suite.tasks)


def test_expected_rollback_and_error_code_are_read_and_a_bad_rollback_names_its_line(tmp_path):
    good = write(
        tmp_path,
        "good.yaml",
        """
        - id: team
          goal: add it
          expect: {rollback: completed, error_code: [phase_failed, invalid_spec]}
        """,
    )
    [task] = load_suite(good, config=CONFIG).tasks
    assert task.expect.rollback == "completed"
    assert task.expect.error_codes() == ("phase_failed", "invalid_spec")
    bad = write(
        tmp_path,
        "bad.yaml",
        """
        - id: team
          goal: add it
          expect:
            rollback: undone
        """,
    )
    [(line, message)] = problems(bad)
    assert line == 4
    assert "expect.rollback: Input should be 'completed', 'failed' or 'not_run'" in message
