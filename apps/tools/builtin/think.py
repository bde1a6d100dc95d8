"""`think`: a scratchpad. The model writes down reasoning; nothing happens on disk."""

from __future__ import annotations

from apps.engine.tools import Tool, ToolResult
from apps.tools.builtin.context import ToolContext


class ThinkTool(Tool):
    name = "think"
    description = (
        "Write down your reasoning or a plan before acting. Has no effect on files; use it to "
        "think through a tricky step."
    )
    input_schema = {
        "type": "object",
        "properties": {"thought": {"type": "string", "description": "Your reasoning."}},
        "required": ["thought"],
        "additionalProperties": False,
    }

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx

    async def execute(self, thought: str) -> ToolResult:
        return ToolResult.success("Noted.")
