"""System prompt: stable block + cache breakpoint + volatile block, sorted sections."""

from __future__ import annotations

import datetime as dt

from apps.engine.context.prompt import build_system_prompt

DAY = dt.date(2026, 6, 29)


def test_stable_block_is_identical_across_tasks_and_carries_the_breakpoint():
    first = build_system_prompt(
        mode="react", skill_prompt="You fix Python.", context="pitfall A", today=DAY
    )
    second = build_system_prompt(
        mode="react",
        skill_prompt="You fix Python.",
        context="memory B",
        today=DAY + dt.timedelta(days=1),
    )
    assert first[0] == second[0]
    assert first[0].cache is True and first[1].cache is False
    assert "You fix Python." in first[0].text
    assert first[1] != second[1]


def test_volatile_material_never_enters_the_stable_block():
    stable, volatile = build_system_prompt(mode="react", context="pitfall: use utf-8", today=DAY)
    assert "pitfall" not in stable.text and "2026-06-29" not in stable.text
    assert "pitfall: use utf-8" in volatile.text and "Today is 2026-06-29." in volatile.text


def test_context_sections_are_sorted_by_name():
    _, volatile = build_system_prompt(
        mode="react", context={"pitfalls": "P", "memory": "M", "empty": "  "}, today=DAY
    )
    assert volatile.text.index("## memory") < volatile.text.index("## pitfalls")
    assert "## empty" not in volatile.text


def test_disabled_prompt_cache_sets_no_breakpoint():
    blocks = build_system_prompt(mode="react", cache=False, today=DAY)
    assert not any(block.cache for block in blocks)


def test_direct_chat_instructions_do_not_mention_tools():
    stable, _ = build_system_prompt(mode="direct_chat", today=DAY)
    assert "tool" not in stable.text.lower()
