"""`manage.py check_llm --agent`: one tiny end-to-end agent task on one model alias.

A two-file workspace in a temporary directory — `calc.py` with a one-line bug and `test_calc.py`
whose test shows it — and the goal "fix it". The task runs in `react` mode on the real engine
with agentkit's own tools rooted in that directory (file reads and edits; commands and
`run_tests` in the sandbox, as the runner builds them), on the alias alone (no fallbacks: a
check must not hide a broken model behind a working one). Nothing is stored: no Task row, no
workspace row; the directory is removed afterwards.

Judged plainly, each with what to do when it fails: did the model call tools, with valid
arguments; did it change `calc.py` (and leave the test alone); does the test pass — run once
more in the sandbox after the run, whatever the model said —; and at what cost (tokens, $).

While it runs, every model call's text is shown as it arrives, and each step's line carries the
call's speed (agent_live.py). When the run stops without the work done, `stopped_because` names
the cause in words: too slow (tokens/s measured, and the step's wall limit: STEP_SECONDS here at
most, below the run's MAX_SECONDS so a slow step is named as such), rambling (the repetition
guard, loop/runaway.py), or no tool call (and the `tool_choice` to set).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from apps.engine.config import AgentkitConfig
from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import ChatRequest, StreamDelta
from apps.engine.loop.react import ReActEngine
from apps.engine.plan.verify.results import VerificationResult
from apps.engine.plan.verify.run import Verifier
from apps.engine.sandbox import Sandbox, SandboxUnavailable
from apps.engine.task import AgentTask
from apps.engine.tools import ToolSet
from apps.tasks.run.agent_live import LiveCalls
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.registry import available_tool_names, build_tools

BUGGY = "    return sum(values) / (len(values) + 1)\n"
WORKSPACE = {
    "calc.py": (
        "def average(values):\n"
        '    """The arithmetic mean of a non-empty list of numbers."""\n' + BUGGY
    ),
    "test_calc.py": (
        "from calc import average\n\n\n"
        "def test_average():\n"
        "    assert average([2, 4, 6]) == 4\n"
        "    assert average([5]) == 5\n"
    ),
}
GOAL = (
    "The test in test_calc.py fails because of a bug in calc.py. Find the bug and fix it with "
    "your editing tool (change calc.py only, not the test), then run the test to confirm."
)
TEST_COMMAND = "pytest -q test_calc.py"
MAX_STEPS = 12
MAX_SECONDS = 300.0
STEP_SECONDS = 120.0  # one model call's wall limit at most (react.step_wall_seconds)
# A tool result with one of these codes means the model's call itself was wrong (tools.py).
INVALID_CALL_CODES = frozenset({"tool_call_invalid", "schema_mismatch", "unknown_tool"})


@dataclass
class AgentCheck:
    alias: str
    provider: str
    model: str
    status: str = "not run"
    steps: int = 0
    seconds: float = 0.0
    tool_calls: list[str] = field(default_factory=list)  # tool names, in order
    invalid_calls: list[str] = field(default_factory=list)  # "name: error_code: message"
    fixed: bool = False  # calc.py changed and test_calc.py left as it was
    test_changed: bool = False
    test_passed: bool | None = None  # None: the test could not be run (no sandbox)
    test_summary: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    cost: float = 0.0
    error: str = ""  # the run's own error, when it failed
    problems: list[str] = field(default_factory=list)  # one plain sentence per failed check
    cuts: list[str] = field(default_factory=list)  # replies cut: rambling or too slow (why)
    tool_choice: str = "auto"  # the alias's setting during the check
    recommended_tool_choice: str = ""  # auto | required, for models.<alias>.tool_choice
    stopped_because: str = ""  # the cause in words when the run did not do the work
    step_wall_seconds: float | None = None  # one model call's wall limit in this check
    max_wall_seconds: float = MAX_SECONDS  # the whole run's in this check
    tokens_per_second: float = 0.0  # the model's writing speed over the check's calls

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


class _OneAlias:
    """The gateway on one alias, without its fallbacks (the engine's ModelClient port)."""

    def __init__(self, gateway: Gateway, alias: str, live: LiveCalls):
        self.gateway, self.alias, self.live = gateway, alias, live

    def stream(
        self, request: ChatRequest, *, model: str | None = None
    ) -> AsyncIterator[StreamDelta]:
        return self.live.watch(self.gateway.stream(request, model=self.alias, fallbacks=False))


def _check_config(config: AgentkitConfig) -> AgentkitConfig:
    """The user's configuration with this check's small step and time limits."""
    react = config.react.model_copy(
        update={
            "max_steps": min(config.react.max_steps, MAX_STEPS),
            "max_wall_seconds": min(config.react.max_wall_seconds, MAX_SECONDS),
            "step_wall_seconds": min(config.react.step_wall_seconds or STEP_SECONDS, STEP_SECONDS),
        }
    )
    return config.model_copy(update={"react": react})


async def agent_check(
    config: AgentkitConfig,
    alias: str,
    *,
    gateway: Gateway | None = None,
    progress: Callable[[str], None] | None = None,
) -> AgentCheck:
    """Run the check on `alias` and judge it. `gateway`: share one (tests); else one is made.
    `progress`: called with text to print as the run goes — the model's text as it arrives, a
    line per step — newlines included (the command writes it as it is)."""
    model = config.models[alias]
    check = AgentCheck(
        alias=alias, provider=model.provider, model=model.model, tool_choice=model.tool_choice
    )
    config = _check_config(config)
    check.step_wall_seconds = config.react.step_wall_seconds
    check.max_wall_seconds = config.react.max_wall_seconds
    live = LiveCalls(progress)
    with tempfile.TemporaryDirectory(prefix="agentkit-check-") as folder:
        root = Path(folder)
        for name, text in WORKSPACE.items():
            (root / name).write_text(text, encoding="utf-8")
        sandbox = Sandbox.shared(config.sandbox)
        verifier = Verifier(sandbox, config.verification)
        ctx = ToolContext(
            root=root,
            sandbox=sandbox,
            network=False,
            timeout_seconds=config.sandbox.timeout_seconds,
            verifier=verifier,
        )
        tools = ToolSet(
            build_tools(ctx, available_tool_names()),
            max_output_chars=config.react.tool_output_max_chars,
        )
        task = AgentTask(task_id="check-llm-agent", goal=GOAL, mode="react", model=alias)
        owned = gateway is None
        gateway = gateway or Gateway(config)
        started = time.monotonic()
        try:
            engine = ReActEngine(_OneAlias(gateway, alias, live), tools, config)
            async with aclosing(engine.run(task)) as events:
                async for event in events:
                    _note(check, event.type, event.data)
                    if progress is not None and (line := _progress_line(event.type, event.data)):
                        measure = live.take()  # a too-slow cut's message has it already
                        progress(line + ("" if "tokens/s" in line else measure) + "\n")
        finally:
            check.seconds = round(time.monotonic() - started, 2)
            if measures := live.measures:  # writing time: after each call's first piece
                seconds = sum(m.seconds - (m.first or 0.0) for m in measures)
                tokens = sum(m.tokens for m in measures)
                check.tokens_per_second = round(tokens / max(seconds, 0.001), 1)
            if owned:
                await gateway.aclose()
        code = (root / "calc.py").read_text(encoding="utf-8")
        check.test_changed = (root / "test_calc.py").read_text(encoding="utf-8") != WORKSPACE[
            "test_calc.py"
        ]
        check.fixed = code != WORKSPACE["calc.py"] and not check.test_changed
        if check.test_changed:  # judge the code against the test as it was given
            (root / "test_calc.py").write_text(WORKSPACE["test_calc.py"], encoding="utf-8")
        try:
            result = await verifier.run_command(root, TEST_COMMAND)
        except SandboxUnavailable as exc:
            check.test_summary = f"could not run the test: {exc}"
        else:
            check.test_passed = result.passed
            check.test_summary = _test_summary(result)
    last = str(live.measures[-1]) if live.measures else "no model call"
    check.recommended_tool_choice, check.stopped_because = _advice(check, last)
    check.problems = _problems(check)
    return check


def _progress_line(kind: str, data: dict[str, Any]) -> str:
    """What the model is doing, one line per step, for people watching the check."""
    if kind == "tool_call":
        return f"  step {data.get('step')}: calls {data.get('name')}"
    if kind == "final_answer":
        text = " ".join(str(data.get("text") or "").split())[:80]
        return f"  step {data.get('step')}: answers {text!r}"
    if kind == "error" and not data.get("fatal"):
        error = data.get("error_struct") or {}
        return f"  step {data.get('step')}: {error.get('error_code')}: {error.get('message')}"
    return ""


def _advice(check: AgentCheck, last_call: str) -> tuple[str, str]:
    """(the tool_choice to configure, why the run stopped without doing the work or "").
    `last_call`: the last model call's measure (tokens, seconds, tokens/s)."""
    recommended = "auto" if check.tool_calls and not check.invalid_calls else "required"
    limit = f"{check.step_wall_seconds:g} s" if check.step_wall_seconds else "no limit"
    cause = ""
    if check.error.startswith("wall_time_exceeded"):  # the run's end, whatever came before
        cause = (
            f"too slow: the check's {check.max_wall_seconds:g} s ran out; the last model call: "
            f"{last_call}; one step may take {limit} (react.step_wall_seconds)"
        )
    elif check.cuts:
        cause = check.cuts[-1]
        if cause.startswith("rambling"):
            cause = f"{cause.rstrip('.')}; the last call: {last_call}"
    elif not check.tool_calls:
        cause = "no tool call: the model answered in prose only; " + (
            "set models.<alias>.tool_choice: required, so the server makes every step a tool "
            "call (by grammar, where it can)"
            if check.tool_choice != "required"
            else "even with tool_choice: required, so the server does not enforce it: use a "
            "server that constrains tool calls (llama.cpp with --jinja) or a stronger model"
        )
    return recommended, cause.replace("<alias>", check.alias)


def _test_summary(result: VerificationResult) -> str:
    """pytest's last line ("1 passed in 0.02s"), and for a failure its first assertion."""
    output = result.commands[0].output if result.commands else result.log
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else ("passed" if result.passed else "failed")
    if not result.passed:
        failing = [" ".join(line.split()) for line in lines if line.startswith(("E ", "FAILED"))]
        if failing:
            summary = f"{summary}; {failing[0]}"
    return summary[:300]


def _note(check: AgentCheck, kind: str, data: dict[str, Any]) -> None:
    if kind == "tool_call":
        check.tool_calls.append(str(data.get("name")))
    elif kind == "tool_result" and data.get("error_code") in INVALID_CALL_CODES:
        message = " ".join(str(data.get("error") or "").split())[:200]
        check.invalid_calls.append(f"{data.get('name')}: {data.get('error_code')}: {message}")
    elif kind == "error" and (data.get("error_struct") or {}).get("error_code") == "runaway_output":
        message = str((data.get("error_struct") or {}).get("message") or "")
        check.cuts.append(("too slow: " if "tokens/s" in message else "rambling: ") + message)
    elif kind == "task_finished":
        check.status = str(data.get("status"))
        check.steps = int(data.get("steps") or 0)
        check.usage = dict(data.get("usage") or {})
        check.cost = float(data.get("cost") or 0.0)
        error = data.get("error") or {}
        if isinstance(error, dict) and error.get("message"):
            check.error = f"{error.get('error_code')}: {error.get('message')}"


def _problems(check: AgentCheck) -> list[str]:
    ended = f"The run ended {check.status}: {check.error}"
    if check.error and not check.tool_calls:  # e.g. a wrong key: the model never got to work
        return [ended]
    problems = []
    if not check.tool_calls:
        problems.append(
            "The model never called a tool: it answered in text only. Agent modes need tool "
            "(function) calling: use a model that supports it, and an endpoint that passes "
            "`tools` through (Ollama, vLLM, llama.cpp: a tool-calling chat template)."
        )
    if check.invalid_calls:
        problems.append(
            f"{len(check.invalid_calls)} of {len(check.tool_calls)} tool calls had invalid "
            "arguments (listed above). A model that does not follow the tools' JSON schemas "
            "wastes steps in agent modes: try a stronger model."
        )
    if check.test_changed:
        problems.append("The model changed the test instead of fixing calc.py.")
    elif not check.fixed:
        problems.append("The model did not change calc.py: the bug is still there.")
    if check.test_passed is False:
        problems.append(f"The test still fails after the run ({check.test_summary}).")
    elif check.test_passed is None:
        problems.append(
            f"The test {check.test_summary}. Run `python manage.py check_sandbox` to see why."
        )
    if check.status != "completed" and check.error:
        problems.append(ended)
    if problems and check.provider == "scripted":
        problems.append(
            f"{check.alias} is the offline scripted model: it plays its script, not this task. "
            "Configure a real model (README: Connect a real model) and check that one."
        )
    return problems


def agent_report(check: AgentCheck) -> str:
    """The check as a few plain lines (the command prints them)."""

    def yes(flag: bool | None) -> str:
        return {True: "yes", False: "NO", None: "unknown"}[flag]

    calls = len(check.tool_calls)
    named = ", ".join(dict.fromkeys(check.tool_calls)) or "none"
    valid = "all with valid arguments" if not check.invalid_calls else "some with INVALID arguments"
    usage = check.usage
    lines = [
        f"  tools called   {yes(calls > 0)} — {calls} call(s) ({named})"
        + (f", {valid}" if calls else ""),
        *(f"                 invalid: {line}" for line in check.invalid_calls[:5]),
        f"  bug fixed      {yes(check.fixed)}"
        + (" — the test was changed instead" if check.test_changed else ""),
        f"  test passes    {yes(check.test_passed)} ({TEST_COMMAND}: {check.test_summary})",
        f"  run            {check.status} in {check.steps} step(s), {check.seconds:.1f} s",
        f"  cost           input {usage.get('input_tokens', 0)} tokens (cached "
        f"{usage.get('cache_read_tokens', 0)}) · output {usage.get('output_tokens', 0)} · "
        f"${check.cost:.4f}",
    ]
    if check.stopped_because:
        lines.append(f"  stopped        {check.stopped_because}")
    lines.append(
        f"  tool_choice    recommended: {check.recommended_tool_choice} "
        f"(models.{check.alias}.tool_choice; now {check.tool_choice})"
    )
    lines += [f"  FAIL: {problem}" for problem in check.problems]
    return "\n".join(lines)
