from __future__ import annotations

import pytest

from apps.engine.config import parse_config
from apps.tasks.errors import ApplicationError
from apps.tasks.routing import route_message

CONFIG = parse_config(
    {
        "skills": {"coder": {"default_mode": "plan_exec"}, "writer": {}},
        "modes": {"default": "react"},
    }
)


@pytest.mark.parametrize(
    ("text", "mode", "skill", "expected"),
    [
        ("fix the bug", None, None, ("fix the bug", "react", "")),
        ("@chat hello there", None, None, ("hello there", "direct_chat", "")),
        ("@plan build it", "react", None, ("build it", "plan_exec", "")),
        ("@team ship", None, None, ("ship", "team_collab", "")),
        ("@skill:coder fix", None, None, ("fix", "plan_exec", "coder")),
        ("@skill:coder @chat fix", None, None, ("fix", "direct_chat", "coder")),
        ("fix", "direct_chat", "writer", ("fix", "direct_chat", "writer")),
        ("email me@example.com", None, None, ("email me@example.com", "react", "")),
    ],
)
def test_prefixes_then_selectors_then_skill_then_default(text, mode, skill, expected):
    routing = route_message(text=text, mode=mode, skill=skill, config=CONFIG)
    assert (routing.text, routing.mode, routing.skill) == expected


def test_unknown_skill_lists_the_known_ones():
    with pytest.raises(ApplicationError) as info:
        route_message(text="@skill:poet write", mode=None, skill=None, config=CONFIG)
    assert "coder, writer" in info.value.message


def test_prefix_alone_is_an_empty_message():
    with pytest.raises(ApplicationError, match="empty"):
        route_message(text="@chat", mode=None, skill=None, config=CONFIG)
