"""verification.react_when_changed in the engine: a react run that edited a coding workspace is
verified before it completes; one that edited nothing is not; without a sandbox it completes
unverified instead of failing."""

from __future__ import annotations

from apps.engine.ports import VerificationOutcome
from apps.engine.sandbox import SandboxUnavailable
from apps.engine.task import AgentTask
from apps.engine.tools import Tool, ToolResult
from tests.engine.helpers import collect, config, of_type, scripted_engine


class Edit(Tool):
    name = "edit"
    description = "Edit a file."
    input_schema = {"type": "object", "properties": {}}

    async def execute(self) -> ToolResult:
        return ToolResult.success("edited", path="a.py", diff="--- a/a.py\n+++ b/a.py\n")


class CodingVerifier:
    coding_workspace = True

    def __init__(self, *, sandbox: bool = True):
        self.calls, self.sandbox = 0, sandbox

    async def __call__(self, answer: str) -> VerificationOutcome:
        self.calls += 1
        if not self.sandbox:
            raise SandboxUnavailable("no sandbox here")
        return VerificationOutcome(passed=True, errors=[], log="1 passed")


EDITS = [
    {"tool_calls": [{"name": "edit", "arguments": {}}]},
    {"text": "Done.", "after_tool": "edit"},
]


async def test_an_edit_in_a_coding_workspace_is_verified_by_default():
    verifier = CodingVerifier()
    engine, _ = scripted_engine(EDITS, tools=[Edit()], cfg=config(), verifier=verifier)
    events = await collect(engine, AgentTask(1, "fix it", mode="react"))
    assert verifier.calls == 1 and len(of_type(events, "verification_result")) == 1
    assert events[-1].data["outcome"] == "verified"


async def test_no_edit_no_verification_and_the_outcome_says_so():
    verifier = CodingVerifier()
    engine, _ = scripted_engine([{"text": "It is fine."}], cfg=config(), verifier=verifier)
    events = await collect(engine, AgentTask(1, "fix it", mode="react"))
    assert verifier.calls == 0 and events[-1].data["outcome"] == "no_changes"


async def test_without_a_sandbox_it_completes_unverified():
    verifier = CodingVerifier(sandbox=False)
    engine, _ = scripted_engine(EDITS, tools=[Edit()], cfg=config(), verifier=verifier)
    events = await collect(engine, AgentTask(1, "fix it", mode="react"))
    assert events[-1].data["status"] == "completed"
    assert events[-1].data["outcome"] == "unverified"


async def test_off_in_the_config_it_is_not_verified():
    verifier = CodingVerifier()
    cfg = config(verification={"react_when_changed": False})
    engine, _ = scripted_engine(EDITS, tools=[Edit()], cfg=cfg, verifier=verifier)
    events = await collect(engine, AgentTask(1, "fix it", mode="react"))
    assert verifier.calls == 0 and events[-1].data["outcome"] == "unverified"
