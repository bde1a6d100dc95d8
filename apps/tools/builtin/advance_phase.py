"""`advance_phase`: move a plan_exec run to its next phase (planning → building → verification →
delivery). The phase belongs to the run, so the engine answers this call itself
(apps/engine/loop/react.py, with apps/engine/plan/phases.py); this class gives the model its description and
schema, and answers calls made outside a plan_exec run (e.g. `manage.py call_tool`)."""

from __future__ import annotations

from apps.engine.tools import Tool, ToolResult
from apps.tools.builtin.context import ToolContext


class AdvancePhaseTool(Tool):
    name = "advance_phase"
    description = (
        "Move to the next phase of the plan (planning -> building -> verification -> "
        "delivery) when the current phase's work is done. Each phase allows its own tools."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "summary": {
                "type": "string",
                "description": "What this phase achieved (optional, one or two sentences).",
            }
        },
        "additionalProperties": False,
    }

    def __init__(self, ctx: ToolContext):
        self.ctx = ctx

    async def execute(self, summary: str = "") -> ToolResult:
        return ToolResult.failure(
            "not_in_plan_exec",
            "advance_phase only works inside a plan_exec run (send the task with @plan).",
        )
