"""A batch file (`run_tasks FILE`): YAML or JSONL tasks, read (reading.py) and checked before
anything runs.

YAML: a list of tasks, or a mapping with `tasks:` and optional `defaults:` (fields every task
inherits unless it sets them). JSONL: one task object per line. A task:

    id: fix-slug                       # unique in the file: letters, digits, '.', '_', '-'
    goal: fix the failing test in tests/test_slug.py
    source: ../demo/workspace          # a directory, or a local git repository (optional `ref`);
                                       # relative to the file; copied into a fresh workspace.
                                       # Left out: an empty workspace (a question, a text task)
    mode: plan_exec                    # else modes.default (run_tasks --mode overrides)
    verification: ["pytest -q"]        # the workspace's verification commands
    skill: python_coder                # optional, a skill of agentkit.yaml
    model: main                        # optional, a model alias (run_tasks --model overrides)
    expect:                            # optional; the report says whether the outcome matched
      status: completed                # or a list of statuses
      answer_contains: "[^a-zA-Z0-9]+" # or a list; each must occur in the final answer
      verification: passed             # the last verification: passed | failed | not_run
      min_reflections: 1
      error_code: phase_failed         # the task's error_struct.error_code (or a list)
      rollback: completed              # team_collab phase rollbacks: completed (at least one,
                                       # none failed) | failed (at least one) | not_run

Every problem is collected with its line (YAML node marks; the JSONL line) and raised together
as one `SuiteError`, so a user fixes the whole file in one go.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from apps.tasks.batch.reading import RawTask, node_line, read_jsonl, read_yaml
from apps.tasks.models import TaskStatus
from apps.tasks.routing import KNOWN_MODES, RUNNABLE_MODES

# The statuses a run ends in (parked: waiting for a spec review that timed out).
STATUSES = tuple(
    sorted(s.value for s in TaskStatus if s.value not in ("queued", "running", "awaiting_review"))
)
SOURCE_CHECK_TIMEOUT = 10  # seconds for `git rev-parse` on a source repository


class SuiteError(Exception):
    """The file cannot run; `errors` holds every problem as (line, message), line 0 = the file."""

    def __init__(self, path: Path, errors: list[tuple[int, str]]):
        self.path = path
        self.errors = sorted(errors, key=lambda e: e[0])
        super().__init__(self.render())

    def render(self) -> str:
        lines = [
            f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}"
            for line, message in self.errors
        ]
        count = len(self.errors)
        head = f"{count} problem{'s' if count != 1 else ''} in {self.path}; nothing was run:"
        return "\n".join([head, *lines])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExpectSpec(_Strict):
    status: str | list[str] | None = None
    answer_contains: str | list[str] | None = None
    verification: Literal["passed", "failed", "not_run"] | None = None
    min_reflections: int | None = Field(default=None, ge=0)
    error_code: str | list[str] | None = None
    rollback: Literal["completed", "failed", "not_run"] | None = None

    def error_codes(self) -> tuple[str, ...]:
        return _as_tuple(self.error_code)

    def statuses(self) -> tuple[str, ...]:
        return _as_tuple(self.status)

    def answer_fragments(self) -> tuple[str, ...]:
        return _as_tuple(self.answer_contains)


class _TaskFields(_Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    goal: str = Field(min_length=1)
    source: str | None = None
    ref: str | None = None
    mode: str | None = None
    verification: list[str] = Field(default_factory=list)
    skill: str | None = None
    model: str | None = None
    expect: ExpectSpec | None = None


class _Defaults(_Strict):
    source: str | None = None
    ref: str | None = None
    mode: str | None = None
    verification: list[str] | None = None
    skill: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    id: str
    goal: str
    mode: str
    line: int
    source: Path | None = None
    ref: str | None = None
    verification: tuple[str, ...] = ()
    skill: str = ""
    model: str = ""
    expect: ExpectSpec | None = None


@dataclass(frozen=True)
class Suite:
    path: Path
    tasks: tuple[TaskSpec, ...] = field(default_factory=tuple)


def _as_tuple(value: str | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


# ── checking ───────────────────────────────────────────────────────────────────────────────────
def _where(raw: RawTask, index: int, loc: tuple) -> str:
    name = raw.data.get("id") if isinstance(raw.data, dict) else None
    label = f"task {name!r}" if isinstance(name, str) and name else f"task #{index + 1}"
    path = ".".join(str(part) for part in loc)
    return f"{label}: {path}" if path else label


def load_suite(
    path: Path,
    *,
    config,
    mode_override: str | None = None,
    model_override: str | None = None,
    max_goal_chars: int | None = None,
) -> Suite:
    """Read and check a batch file. Raises SuiteError listing every problem with its line."""
    path = Path(path)
    errors: list[tuple[int, str]] = []
    if path.suffix.lower() not in (".yaml", ".yml", ".jsonl"):
        raise SuiteError(path, [(0, "a batch file ends in .yaml, .yml or .jsonl")])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(path, [(0, f"cannot read it: {exc}")]) from None
    defaults: dict = {}
    defaults_lines = lambda loc: 0  # noqa: E731
    if path.suffix.lower() == ".jsonl":
        raws = read_jsonl(text, errors)
    else:
        raws, defaults, defaults_node = read_yaml(path, text, errors)
        defaults_lines = lambda loc: node_line(defaults_node, loc, 1)  # noqa: E731
    if defaults:
        try:
            _Defaults.model_validate(defaults)
        except ValidationError as exc:
            for err in exc.errors():
                errors.append((defaults_lines(err["loc"]), f"defaults.{_loc(err)}: {err['msg']}"))
            defaults = {}
    if not raws and not errors:
        errors.append((0, "the file holds no tasks"))
    base = path.resolve().parent
    seen: dict[str, int] = {}
    tasks = []
    for index, raw in enumerate(raws):
        spec = _check_task(
            raw, index, defaults, defaults_lines, base, config, errors,
            mode_override=mode_override, model_override=model_override,
            max_goal_chars=max_goal_chars,
        )  # fmt: skip
        task_id = raw.data.get("id") if isinstance(raw.data, dict) else None
        if isinstance(task_id, str) and task_id in seen:
            errors.append(
                (raw.lines(("id",)), f"task {task_id!r}: id already used on line {seen[task_id]}")
            )
            continue
        if isinstance(task_id, str):
            seen[task_id] = raw.lines(("id",))
        if spec is not None:
            tasks.append(spec)
    if errors:
        raise SuiteError(path, errors)
    return Suite(path=path, tasks=tuple(tasks))


def _loc(err: dict) -> str:
    return ".".join(str(part) for part in err["loc"])


def _check_task(
    raw, index, defaults, defaults_lines, base, config, errors, **options
) -> TaskSpec | None:
    if not isinstance(raw.data, dict):
        errors.append((raw.line, f"task #{index + 1}: expected a mapping with id, goal, ..."))
        return None
    merged = {**{k: v for k, v in defaults.items() if v is not None}, **raw.data}

    def line_of(loc: tuple) -> int:
        if loc and loc[0] not in raw.data and loc[0] in defaults:
            return defaults_lines(loc)
        return raw.lines(loc)

    fields = None
    try:
        fields = _TaskFields.model_validate(merged)
    except ValidationError as exc:
        for err in exc.errors():
            message = err["msg"]
            if err["type"] == "extra_forbidden":
                model = ExpectSpec if err["loc"][:1] == ("expect",) else _TaskFields
                message = f"unknown field; known: {', '.join(model.model_fields)}"
            elif err["type"] == "string_pattern_mismatch":
                message = (
                    "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
                )
            errors.append((line_of(err["loc"]), f"{_where(raw, index, err['loc'])}: {message}"))
    # The checks against the configuration and the disk run on whatever fields have the right
    # type, so one run reports every problem of the task.
    problems, source = _semantic_problems(merged, base, config, options)
    for loc, message in problems:
        errors.append((line_of(loc), f"{_where(raw, index, loc)}: {message}"))
    if fields is None or problems:
        return None
    return TaskSpec(
        id=fields.id,
        goal=fields.goal,
        mode=options["mode_override"] or fields.mode or config.modes.default,
        line=raw.line,
        source=source,
        ref=fields.ref,
        verification=tuple(fields.verification),
        skill=fields.skill or "",
        model=options["model_override"] or fields.model or "",
        expect=fields.expect,
    )


def _text(data: dict, key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _semantic_problems(data: dict, base: Path, config, options) -> tuple[list, Path | None]:
    problems: list[tuple[tuple, str]] = []
    mode = _text(data, "mode")
    if not options["mode_override"] and mode is not None:
        if mode not in KNOWN_MODES:
            problems.append((("mode",), f"unknown mode {mode!r}; choose one of "
                             f"{', '.join(RUNNABLE_MODES)}"))  # fmt: skip
        elif mode not in RUNNABLE_MODES:
            problems.append((("mode",), f"mode {mode!r} is not available in this "
                             f"version; choose one of {', '.join(RUNNABLE_MODES)}"))  # fmt: skip
    skill = _text(data, "skill")
    if skill and skill not in config.skills:
        known = ", ".join(sorted(config.skills)) or "none configured"
        problems.append((("skill",), f"unknown skill {skill!r}; known: {known}"))
    model = _text(data, "model")
    if model and not options["model_override"] and model not in config.models:
        problems.append((("model",), f"unknown model alias {model!r}; configured: "
                         f"{', '.join(sorted(config.models))}"))  # fmt: skip
    goal, limit = _text(data, "goal"), options["max_goal_chars"]
    if goal and limit and len(goal) > limit:
        problems.append((("goal",), f"the goal has {len(goal)} characters; at most {limit}"))
    commands = data.get("verification")
    for number, command in enumerate(commands if isinstance(commands, list) else []):
        if isinstance(command, str) and not command.strip():
            problems.append((("verification", number), "an empty verification command"))
    expect = data.get("expect")
    statuses = expect.get("status") if isinstance(expect, dict) else None
    for status in [statuses] if isinstance(statuses, str) else statuses or []:
        if isinstance(status, str) and status not in STATUSES:
            problems.append((("expect", "status"), f"unknown status {status!r}; one of "
                             f"{', '.join(STATUSES)}"))  # fmt: skip
    source, raw_source, ref = None, _text(data, "source"), _text(data, "ref")
    if raw_source is not None:
        source, problem = _check_source(base, raw_source, ref)
        if problem:
            problems.append((("ref",) if problem.startswith("ref") else ("source",), problem))
    elif ref is not None:
        problems.append((("ref",), "`ref` needs a `source` that is a git repository"))
    return problems, source


def is_git_repository(directory: Path) -> bool:
    return (directory / ".git").exists()


def _check_source(base: Path, raw: str, ref: str | None) -> tuple[Path | None, str]:
    source = (base / Path(raw).expanduser()).resolve()
    if not source.is_dir():
        return None, f"source {raw!r} is not a directory ({source}); paths are relative to the file"
    if ref is None:
        return source, ""
    if not is_git_repository(source):
        return None, f"ref {ref!r} needs a git repository, and {source} is not one"
    try:
        found = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
            capture_output=True,
            timeout=SOURCE_CHECK_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"ref {ref!r}: git could not be asked ({exc})"
    if found.returncode != 0:
        return None, f"ref {ref!r} is not a commit, branch or tag of {source}"
    return source, ""
