"""Rule-based reflector: a finished task's events → lessons.

One lesson per distinct symptom: verification failures, tool errors, phase violations, loops,
timeouts and give-ups. A task that failed because of its environment (model outage, no sandbox,
missing workspace, cancellation) teaches nothing: the agent did nothing wrong."""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.evolution.models import Category, Severity
from apps.evolution.text import first_line

# error codes that say the environment failed, not the agent
ENVIRONMENT_ERRORS = frozenset(
    {
        "cancelled",
        "engine_error",
        "internal_error",
        "interrupted",
        "mode_not_available",
        "sandbox_unavailable",
        "workspace_missing",
    }
)
FAILURE_OUTCOMES = frozenset({"failed", "gave_up_after_reflections"})

SEVERITY = {
    Category.GIVE_UP: Severity.HIGH,
    Category.VERIFICATION_FAILURE: Severity.HIGH,
    Category.LOOP: Severity.HIGH,
    Category.TIMEOUT: Severity.MEDIUM,
    Category.PHASE_VIOLATION: Severity.MEDIUM,
    Category.TOOL_ERROR: Severity.LOW,
    Category.SUCCESS_PATTERN: Severity.LOW,
}


@dataclass
class LessonDraft:
    category: str
    trigger: str
    advice: str
    evidence: list[int] = field(default_factory=list)

    @property
    def severity(self) -> str:
        return SEVERITY[self.category]

    @property
    def text(self) -> str:
        return f"{self.trigger} — {self.advice}"


def is_environment_failure(events: list[dict]) -> bool:
    for event in events:
        code = _error_code(event)
        if code and (code in ENVIRONMENT_ERRORS or code.startswith("llm_")):
            return True
    return False


def reflect(events: list[dict]) -> list[LessonDraft]:
    """`events`: the task's events as {"seq", "type", "data"}, in order."""
    if is_environment_failure(events):
        return []
    drafts: dict[str, LessonDraft] = {}

    def add(category: str, trigger: str, advice: str, seq: int) -> None:
        key = trigger.lower()
        draft = drafts.get(key)
        if draft is None:
            drafts[key] = LessonDraft(category, trigger, advice, [seq])
            return
        draft.evidence.append(seq)
        if category == Category.GIVE_UP:  # the stronger reading of the same symptom
            draft.category, draft.advice = category, advice

    for event in events:
        kind, data, seq = event["type"], event.get("data") or {}, event["seq"]
        if kind == "verification_result" and not data.get("passed", True):
            symptom = _first_error(data.get("errors") or [], data.get("log", ""))
            add(
                Category.VERIFICATION_FAILURE,
                f"verification failed: {symptom}",
                "Run the project's checks before the final answer and fix what they report; "
                "read the failing test before editing.",
                seq,
            )
        elif kind == "tool_result" and not data.get("ok", True):
            code = data.get("error_code") or "error"
            add(
                Category.TOOL_ERROR,
                f"tool {data.get('name', '?')} failed [{code}]: {first_line(data.get('error', ''))}",
                "Read the error, fix the arguments, and do not repeat the same call.",
                seq,
            )
        elif kind == "phase_violation":
            add(
                Category.PHASE_VIOLATION,
                f"called {data.get('tool', '?')} in phase {data.get('phase', '?')}",
                first_line(data.get("hint") or data.get("message") or "")
                or "Call advance_phase before using the next phase's tools.",
                seq,
            )
        elif kind == "error":
            code = _error_code(event)
            if code in ("loop_detected", "loop_suspected"):
                add(
                    Category.LOOP,
                    f"repeated the same action ({code})",
                    "When a step does not change anything, change approach instead of repeating.",
                    seq,
                )
            elif code in ("max_steps_exceeded", "wall_time_exceeded", "timeout"):
                add(
                    Category.TIMEOUT,
                    f"ran out of budget ({code})",
                    "Plan the smallest change that satisfies the goal and verify early.",
                    seq,
                )
            elif code == "gave_up_after_reflections":
                errors = [
                    e.get("data", {}).get("errors") or []
                    for e in events
                    if e["type"] == "verification_result" and not e["data"].get("passed", True)
                ]
                symptom = _first_error(errors[-1] if errors else [], "")
                add(
                    Category.GIVE_UP,
                    f"verification failed: {symptom}",
                    "This failure survived every reflection before: read the failing test and "
                    "the code it checks in full, then change the approach.",
                    seq,
                )
    return list(drafts.values())


def _error_code(event: dict) -> str:
    data = event.get("data") or {}
    if event["type"] == "error":
        return (data.get("error_struct") or {}).get("error_code", "")
    if event["type"] == "task_finished":
        return (data.get("error") or {}).get("error_code", "")
    if event["type"] == "recovery_started":  # the failed attempt's own code (issue 14)
        return (data.get("error_struct") or {}).get("error_code", "")
    if event["type"] == "tool_result" and data.get("error_code") == "sandbox_unavailable":
        return "sandbox_unavailable"
    return ""


def _first_error(errors: list[str], log: str) -> str:
    for text in errors:
        line = first_line(text)
        if line:
            return line
    return first_line(log) or "the checks reported a failure"
