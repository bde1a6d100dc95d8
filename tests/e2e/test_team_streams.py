"""Concurrent team phases on the chat page: two experts stream at the same time (their events
interleave, each carrying its `phase_id`, each phase counting its steps from 1), and each phase's
text lands in its own bubble — never one bubble mixing both experts' tokens."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_login import log_in

pytestmark = pytest.mark.e2e

TASK = 876543


def test_concurrent_phases_stream_into_their_own_bubbles(page: Page, server):
    log_in(page, server)
    page.wait_for_function("window.agentkitSocket && window.agentkitSocket.opens >= 1")
    page.evaluate(f"window.agentkitOpenTask({TASK})")  # the task open in the pane
    seq = 0

    def inject(kind: str, **data) -> None:
        nonlocal seq
        seq += 1
        event = {"task_id": TASK, "seq": seq, "ts": "2026-01-01T00:00:00Z", "type": kind}
        page.evaluate("ev => window.agentkitSocket.inject(ev)", {**event, "data": data})

    inject("task_started", goal="two experts at once", mode="team_collab", phases=["a", "b"])
    for phase, role in (("a", "coder"), ("b", "reviewer")):
        inject("phase_started", phase_id=phase, title=f"Phase {phase}", role=role, depends_on=[])
    for word in ("one ", "two ", "three"):  # interleaved, as the two runs stream
        inject("token", phase_id="a", step=1, text=f"alpha-{word}")
        inject("token", phase_id="b", step=1, text=f"beta-{word}")
    inject("final_answer", phase_id="a", step=1, text="alpha-one alpha-two alpha-three")
    inject("phase_completed", phase_id="a", title="Phase a", role="coder", status="completed")
    inject("tool_call", phase_id="b", step=1, call_id="b1", name="read_file", arguments={})
    inject("tool_result", phase_id="b", step=1, call_id="b1", ok=True, output="text")
    inject("token", phase_id="b", step=2, text="beta-again")  # b goes on after a finished
    inject("final_answer", phase_id="b", step=2, text="beta-again")
    inject("phase_completed", phase_id="b", title="Phase b", role="reviewer", status="completed")
    inject("task_finished", status="completed")

    task = page.locator(f'article.task[data-task-id="{TASK}"]')
    bubbles = task.locator(".bubble.assistant")
    expect(bubbles).to_have_count(3)
    expect(bubbles.nth(0)).to_have_text("alpha-one alpha-two alpha-three")
    expect(bubbles.nth(1)).to_have_text("beta-one beta-two beta-three")
    expect(bubbles.nth(2)).to_have_text("beta-again")
