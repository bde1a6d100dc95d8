"""`run_tests`: the agent runs the checks that verification will run at the final answer (or one
given command), inside the sandbox with the network off, and gets the condensed result.

Without `command` it runs exactly what `Verifier.verify` runs (pytest + ruff for a Python
workspace, else the spec's verification commands), so a green run_tests means a green final
verification. A check that ran out of the sandbox's memory cap fails with `memory_limit` (and
what to do) instead of `tests_failed`. The Verifier comes from the constructor, else from `ToolContext.verifier` when
the context carries one, else it is built on the context's sandbox with default settings.
"""

from __future__ import annotations

from apps.engine.config import VerificationConfig
from apps.engine.plan.verify.results import VerificationResult
from apps.engine.plan.verify.run import Verifier
from apps.engine.sandbox import SandboxUnavailable, default_sandbox
from apps.engine.tools import Tool, ToolResult, truncate_output
from apps.tools.builtin.context import ToolContext

MAX_OUTPUT_CHARS = 10_000


def format_verification(result: VerificationResult) -> str:
    """Passed: the one-line summary. Failed: the condensed errors, numbered."""
    if result.passed or not result.errors:
        return f"PASSED: {result.summary}" if result.commands else result.summary
    lines = [f"{index}. {error}\n" for index, error in enumerate(result.errors, 1)]
    return truncate_output("\n".join(lines).rstrip(), MAX_OUTPUT_CHARS)


class RunTestsTool(Tool):
    name = "run_tests"
    description = (
        "Run the workspace's checks, the same ones verification runs before your final answer "
        "(pytest and ruff for a Python project, else the spec's verification commands), or one "
        "`command` you give (e.g. `pytest tests/test_x.py -q`). Sandboxed, network off. Returns "
        "pass/fail with the first failure, the assertion and the traceback tail."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "description": "One test command to run instead of the full verification.",
            }
        },
        "additionalProperties": False,
    }

    def __init__(self, ctx: ToolContext, verifier: Verifier | None = None):
        self.ctx = ctx
        self.verifier = (
            verifier
            or getattr(ctx, "verifier", None)
            or Verifier(ctx.sandbox or default_sandbox(), VerificationConfig())
        )

    async def execute(self, command: str | None = None) -> ToolResult:
        if command is not None and not command.strip():
            command = None
        if command is not None and self.ctx.command_filter is not None:
            refusal = self.ctx.command_filter(command)
            if refusal:
                return ToolResult.failure("command_not_allowed", refusal)
        try:
            if command is None:
                result = await self.verifier.verify(self.ctx.root, self.ctx.verification_commands)
            else:
                result = await self.verifier.run_command(self.ctx.root, command)
        except SandboxUnavailable as exc:
            return ToolResult.failure("sandbox_unavailable", str(exc))
        output = format_verification(result)
        data = result.as_event_data()
        for outcome in data["commands"]:  # the full log stays out of the audit row's data
            outcome.pop("output", None)
        if result.passed:
            return ToolResult.success(output, **data)
        memory = [o for o in result.commands if o.error_code == "memory_limit"]
        if memory:  # not the code's fault as such: the tests need less memory, or a higher cap
            return ToolResult.failure(
                "memory_limit", memory[0].errors[0].splitlines()[0], output, **data
            )
        return ToolResult.failure("tests_failed", result.summary, output, **data)
