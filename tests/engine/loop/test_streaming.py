"""DeltaBatcher: token deltas batched by flush_interval_ms on a monotonic clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.engine.loop.streaming import DeltaBatcher


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_first_chunk_is_emitted_at_once():
    batcher = DeltaBatcher(50, clock=FakeClock())
    assert batcher.push("Hel") == "Hel"


def test_chunks_within_the_interval_are_held_then_emitted_together():
    clock = FakeClock()
    batcher = DeltaBatcher(50, clock=clock)
    batcher.push("a")
    clock.now += 0.010
    assert batcher.push("b") is None
    clock.now += 0.020
    assert batcher.push("c") is None
    clock.now += 0.021  # 51 ms since the last flush
    assert batcher.push("d") == "bcd"


def test_begin_starts_a_new_stream_whose_first_chunk_goes_out_at_once():
    clock = FakeClock()
    batcher = DeltaBatcher(50, clock=clock)
    assert batcher.push("a") == "a"
    clock.now += 0.001
    assert batcher.push("b") is None  # held: the interval is not over
    assert batcher.begin() is batcher  # a new model call (the engine flushed or dropped "b")
    assert batcher.flush() is None  # nothing held over from the last stream
    clock.now += 0.001
    assert batcher.push("c") == "c"  # not held although the interval is not over


def test_remainder_is_flushed_at_the_end_of_the_stream():
    clock = FakeClock()
    batcher = DeltaBatcher(50, clock=clock)
    batcher.push("x")
    clock.now += 0.001
    batcher.push("y")
    assert batcher.flush() == "y"
    assert batcher.flush() is None


def test_zero_interval_emits_every_chunk():
    clock = FakeClock()
    batcher = DeltaBatcher(0, clock=clock)
    assert [batcher.push(c) for c in "abc"] == ["a", "b", "c"]


def test_keep_alive_lets_held_text_out_once_the_interval_is_over():
    clock = FakeClock()
    batcher = DeltaBatcher(50, clock=clock)
    batcher.push("a")
    batcher.push("b")
    assert batcher.push("") is None
    clock.now += 0.06
    assert batcher.push("") == "b"
    assert batcher.push("") is None


def test_discard_forgets_held_text():
    clock = FakeClock()
    batcher = DeltaBatcher(50, clock=clock)
    batcher.push("a")
    batcher.push("b")
    batcher.discard()
    assert batcher.flush() is None


def test_no_character_is_lost_or_reordered_over_a_long_irregular_stream():
    clock = FakeClock()
    batcher = DeltaBatcher(50, clock=clock)
    chunks = [f"<{i}>" for i in range(1000)]
    out = []
    for i, chunk in enumerate(chunks):
        clock.now += 0.001 * (i % 7)
        if (text := batcher.push(chunk)) is not None:
            out.append(text)
    if (rest := batcher.flush()) is not None:
        out.append(rest)
    assert "".join(out) == "".join(chunks)
    elapsed_ms = (clock.now - 100.0) * 1000
    assert len(out) <= elapsed_ms / 50 + 2


class ReferenceBatcher:
    """The batching rule as first written (every chunk held, then joined): DeltaBatcher.push's
    shortcut for a chunk when nothing is held must give exactly what this gives."""

    def __init__(self, interval_ms: int, clock) -> None:
        self.interval, self.clock, self.pending, self.last = interval_ms / 1000, clock, [], None

    def push(self, text: str) -> str | None:
        if text:
            self.pending.append(text)
        if not self.pending:
            return None
        now = self.clock()
        if self.last is not None and now - self.last < self.interval:
            return None
        self.last = now
        return self.take()

    def flush(self) -> str | None:
        return self.take() if self.pending else None

    def take(self) -> str:
        text = "".join(self.pending)
        self.pending.clear()
        return text


@settings(max_examples=500, deadline=None)
@given(
    interval=st.sampled_from([0, 1, 50, 200]),
    ops=st.lists(
        st.tuples(
            st.sampled_from(["push", "push", "push", "flush", "discard", "begin"]),
            st.sampled_from(["", "a", "bc", " "]),
            st.integers(0, 120),  # ms the clock moves before the operation
        ),
        max_size=60,
    ),
)
def test_push_gives_what_the_reference_rule_gives(interval, ops):
    clock = FakeClock()
    batcher, reference = DeltaBatcher(interval, clock=clock), ReferenceBatcher(interval, clock)
    for op, text, advance in ops:
        clock.now += advance / 1000
        if op == "push":
            assert batcher.push(text) == reference.push(text)
        elif op == "flush":
            assert batcher.flush() == reference.flush()
        elif op == "discard":
            batcher.discard()
            reference.pending.clear()
        else:  # a new model call
            batcher.begin()
            reference = ReferenceBatcher(interval, clock)
    assert batcher.flush() == reference.flush()


# ── through the engine, in real time ─────────────────────────────────────────────────────────
import time  # noqa: E402

from apps.engine.task import AgentTask  # noqa: E402
from tests.engine.helpers import config, of_type, scripted_engine  # noqa: E402

TEXT = "".join(f"t{i} " for i in range(300))  # 300 chunks


async def stream_tokens(flush_interval_ms: int, chunk_delay: float):
    engine, _ = scripted_engine(
        [TEXT],
        cfg=config(streaming={"flush_interval_ms": flush_interval_ms}),
        chunk_delay=chunk_delay,
    )
    started = time.monotonic()
    events = [e async for e in engine.run(AgentTask(task_id=1, goal="talk", mode="direct_chat"))]
    return of_type(events, "token"), time.monotonic() - started


async def test_50ms_flush_at_one_token_per_ms_bounds_events_and_loses_nothing():
    tokens, duration = await stream_tokens(50, chunk_delay=0.001)
    assert "".join(e.data["text"] for e in tokens) == TEXT
    assert len(tokens) <= duration * 1000 / 50 + 2
    assert len(tokens) < 300 / 10  # batched, far fewer than the chunks
    assert tokens[0].data["text"] == "t0 "  # the first chunk was not held back


async def test_zero_flush_interval_makes_every_chunk_an_event():
    tokens, _ = await stream_tokens(0, chunk_delay=0.0)
    assert [e.data["text"] for e in tokens] == [f"t{i} " for i in range(300)]
