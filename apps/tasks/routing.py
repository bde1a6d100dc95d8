"""What a chat message asks for: its mode and skill (the `@` prefixes, the page's selectors,
the defaults) and the limit on its length."""

from __future__ import annotations

from dataclasses import dataclass

from apps.tasks.errors import ApplicationError

MODE_PREFIXES = {
    "@chat": "direct_chat",
    "@react": "react",
    "@plan": "plan_exec",
    "@team": "team_collab",
}
KNOWN_MODES = ("direct_chat", "react", "plan_exec", "team_collab")
# The modes this version runs: the only ones the chat page offers, and the only ones the runner
# starts (apps/tasks/run/runner.py refuses the others with `mode_not_available`).
RUNNABLE_MODES = ("direct_chat", "react", "plan_exec", "team_collab")


def max_message_chars() -> int:
    """The one limit on a message's length: the chat page states it and the server enforces it
    (settings.AGENTKIT_MAX_MESSAGE_CHARS)."""
    from django.conf import settings

    return settings.AGENTKIT_MAX_MESSAGE_CHARS


@dataclass(frozen=True)
class Routing:
    """What a chat message asks for once its `@` prefixes are read."""

    text: str
    mode: str
    skill: str


def route_message(*, text: str, mode: str | None, skill: str | None, config) -> Routing:
    """Leading `@chat`/`@react`/`@plan`/`@team` and `@skill:<name>` words pick the mode and skill;
    then the page's selectors; then the skill's default mode; then modes.default."""
    words = text.strip().split()
    prefix_mode = prefix_skill = None
    consumed = 0
    for word in words:
        lower = word.lower()
        if lower in MODE_PREFIXES and prefix_mode is None:
            prefix_mode = MODE_PREFIXES[lower]
        elif lower.startswith("@skill:") and prefix_skill is None:
            prefix_skill = word.split(":", 1)[1]
        else:
            break
        consumed += 1
    body = text.strip()
    for _ in range(consumed):
        body = body.split(None, 1)[1] if len(body.split(None, 1)) > 1 else ""
    chosen_skill = prefix_skill or (skill or "")
    if chosen_skill and chosen_skill not in config.skills:
        known = ", ".join(sorted(config.skills)) or "none configured"
        raise ApplicationError(
            f"unknown skill {chosen_skill!r}; known skills: {known}",
            {"error_code": "unknown_skill", "known": sorted(config.skills)},
        )
    if mode and mode not in KNOWN_MODES:
        raise ApplicationError(
            f"unknown mode {mode!r}; choose one of {', '.join(KNOWN_MODES)}",
            {"error_code": "unknown_mode"},
        )
    skill_mode = config.skills[chosen_skill].default_mode if chosen_skill else None
    chosen_mode = prefix_mode or mode or skill_mode or config.modes.default
    if not body.strip():
        raise ApplicationError(
            "the message is empty: say what the agent should do", {"error_code": "empty_message"}
        )
    return Routing(text=body.strip(), mode=chosen_mode, skill=chosen_skill)
