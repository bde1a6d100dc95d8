"""check_llm --agent's live view (apps/tasks/run/agent_live.py): a model call's text, reasoning
and tool call shown as they arrive, a long reply's progress, each call measured."""

from __future__ import annotations

import asyncio

from apps.engine.llm.types import ChatResponse, StreamDelta, Usage
from apps.tasks.run.agent_live import LiveCalls


async def stream(deltas: list[StreamDelta], pause: float = 0.0):
    for delta in deltas:
        await asyncio.sleep(pause)
        yield delta


async def drain(live: LiveCalls, deltas: list[StreamDelta], pause: float = 0.0) -> None:
    async for _ in live.watch(stream(deltas, pause)):
        pass


async def test_text_reasoning_and_a_tool_call_are_shown_on_one_line_each_call():
    out: list[str] = []
    live = LiveCalls(out.append)
    reply = ChatResponse(content="Reading.", usage=Usage(100, 12))
    await drain(
        live,
        [
            StreamDelta(reasoning="The bug\nis in calc.py."),
            StreamDelta(text="Reading"),
            StreamDelta(text="."),
            StreamDelta(call="\nread_file "),
            StreamDelta(call='{"path": '),
            StreamDelta(call='"calc.py"}'),
            StreamDelta(response=reply),
        ],
    )
    shown = "".join(out)
    assert shown == (
        '  model> [thinking] The bug is in calc.py. [text] Reading. [tool call] read_file {"path":'
        ' "calc.py"}\n'
    )
    (measure,) = live.measures
    assert measure.finished and measure.tokens == 12  # the server's count when it gave one
    assert live.take().startswith(" (12 tokens in ") and live.take() == ""


async def test_a_long_reply_is_cut_short_on_screen_and_its_progress_noted():
    out: list[str] = []
    live = LiveCalls(out.append, show_chars=40, note_seconds=0.15)
    words = [StreamDelta(text=f"word{i} ") for i in range(60)]
    await drain(live, words, pause=0.01)  # no reply: the stream stopped (a cut)
    shown = "".join(out)
    first_line, *notes = shown.splitlines()
    assert first_line.startswith("  model> word0 word1") and first_line.endswith("…")
    assert len(first_line) <= len("  model> ") + 41
    assert notes and all(n.startswith("  model> … still writing: about ") for n in notes)
    assert "tokens/s" in notes[0]
    (measure,) = live.measures
    assert not measure.finished and measure.tokens == (len("".join(d.text for d in words)) + 3) // 4
    assert "about" in str(measure) and "the first after" in str(measure)


async def test_without_a_writer_it_only_measures():
    live = LiveCalls()
    await drain(live, [StreamDelta(text="Hi."), StreamDelta(response=ChatResponse("Hi."))])
    assert len(live.measures) == 1
