"""Built-in evaluation suites (`run_tasks --suite NAME`): today `humaneval`.

Each problem becomes a source directory (apps/engine/evals/humaneval.py: the stub module and
the docstring's examples as tests, nothing of the hidden tests) that the batch copies into a
fresh workspace per task and mode, like any batch file's `source`. After a task ends, `score`
runs the problem's hidden `check` on that workspace INSIDE THE SANDBOX (the code is the
model's), network off, with the sandbox's limits and a time limit; the outcome gets
`hidden_tests` (passed | failed | timed_out | not_run) and `solved`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from apps.engine.evals.humaneval import HumanEvalError, Problem, select
from apps.engine.sandbox import Sandbox, SandboxUnavailable
from apps.tasks.batch.evaluation import Evaluation
from apps.tasks.batch.running import BatchOptions, Progress, run_batch
from apps.tasks.batch.spec import Suite, SuiteError, TaskSpec

SUITES = ("humaneval",)
HIDDEN_TIMEOUT_SECONDS = 20.0  # per problem; the dataset's own harness allows 3 s of CPU


def humaneval_suite(
    directory: Path,
    *,
    mode: str,
    model: str = "",
    limit: int | None = None,
    ids: list[str] | None = None,
) -> tuple[Suite, dict[str, Problem]]:
    """The suite's tasks in `mode`, their sources written under `directory`; and the problems by
    task id (for scoring)."""
    try:
        chosen = select(limit=limit, ids=ids)
    except HumanEvalError as exc:
        raise SuiteError(Path("humaneval"), [(0, str(exc))]) from None
    tasks, by_id = [], {}
    for problem in chosen:
        source = directory / problem.slug
        if not source.is_dir():
            source.mkdir(parents=True)
            for name, text in problem.workspace_files().items():
                (source / name).write_text(text, encoding="utf-8")
        tasks.append(
            TaskSpec(
                id=problem.slug, goal=problem.goal(), mode=mode, line=0, source=source, model=model
            )
        )
        by_id[problem.slug] = problem
    return Suite(path=Path("humaneval"), tasks=tuple(tasks)), by_id


class HiddenScorer:
    """`await scorer(spec, workspace)` → {"hidden_tests", "solved", "detail"}."""

    def __init__(self, problems: dict[str, Problem], sandbox: Sandbox,
                 timeout: float = HIDDEN_TIMEOUT_SECONDS):  # fmt: skip
        self.problems = problems
        self.sandbox = sandbox
        self.timeout = timeout

    async def __call__(self, spec: TaskSpec, workspace: Path) -> dict:
        problem = self.problems.get(spec.id)
        if problem is None or not workspace.is_dir():
            return {"hidden_tests": "not_run", "solved": False, "detail": "no workspace"}
        try:
            result = await self.sandbox.run(
                [sys.executable, "-c", problem.check_program()],
                workspace,
                network=False,
                writable=(workspace,),  # as during the task: the code is the model's anyway
                timeout=self.timeout,
                env={"PYTHONDONTWRITEBYTECODE": "1"},
            )
        except SandboxUnavailable as exc:
            return {"hidden_tests": "not_run", "solved": False, "detail": str(exc)[:200]}
        if result.timed_out:
            return {
                "hidden_tests": "timed_out",
                "solved": False,
                "detail": f"killed after {self.timeout:g} s",
            }
        if result.ok:
            return {"hidden_tests": "passed", "solved": True, "detail": ""}
        last = (result.stderr.strip().splitlines() or [f"exit {result.exit_code}"])[-1]
        return {"hidden_tests": "failed", "solved": False, "detail": last[:200]}


async def run_suite(
    name: str,
    *,
    modes: list[str],
    repeat: int,
    limit: int | None,
    ids: list[str] | None,
    model: str,
    user,
    config,
    options: BatchOptions,
    progress_for: Callable[[Suite, str, int], Progress],
    sources: Path,
) -> Evaluation:
    """Every task of suite `name` in each mode, `repeat` times, each run a batch of its own in
    fresh workspaces (copied from `sources`), scored by the hidden tests."""
    if name not in SUITES:
        raise SuiteError(Path(name), [(0, f"unknown suite {name!r}; one of {', '.join(SUITES)}")])
    evaluation = Evaluation(suite=name, modes=list(modes), repeat=repeat)
    sandbox = Sandbox.shared(config.sandbox)
    for number in range(1, repeat + 1):
        for mode in modes:
            suite, problems = humaneval_suite(sources, mode=mode, model=model, limit=limit, ids=ids)
            scored = replace(options, score=HiddenScorer(problems, sandbox))
            progress = progress_for(suite, mode, number)
            try:
                run = await run_batch(
                    suite, user=user, config=config, options=scored, progress=progress
                )
            finally:
                close = getattr(progress, "close", None)
                if close is not None:
                    close()
            evaluation.runs.append((mode, number, run))
            if run.interrupted:
                return evaluation
    return evaluation
