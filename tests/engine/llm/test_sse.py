"""The pure SSE decoder: bytes in, events out, whatever the chunk boundaries."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.engine.llm.sse import ServerSentEvent, SSEDecoder, decode_all
from tests.engine.llm.conftest import recording


def events_of(data: bytes, chunk: int | None = None) -> list[ServerSentEvent]:
    if chunk is None:
        return list(decode_all([data]))
    return list(decode_all(data[i : i + chunk] for i in range(0, len(data), chunk)))


def test_named_events_with_data_are_decoded():
    events = events_of(b'event: ping\ndata: {}\n\nevent: message_stop\ndata: {"a": 1}\n\n')
    assert [(e.event, e.data) for e in events] == [("ping", "{}"), ("message_stop", '{"a": 1}')]


def test_multi_line_data_is_joined_with_newlines():
    (event,) = events_of(b"data: first\ndata:second\ndata:  third\n\n")
    assert event.data == "first\nsecond\n third"  # one leading space is removed, not two


def test_crlf_and_cr_line_endings_are_accepted():
    assert [e.data for e in events_of(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n")] == ["a", "b", "c"]


def test_crlf_split_across_chunks_is_one_line_end():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\r") == []
    assert [e.data for e in decoder.feed(b"\n\r\n")] == ["x"]


def test_comments_unknown_fields_and_events_without_data_are_skipped():
    data = b": keep-alive\nfoo: bar\nevent: nothing\n\nid: 7\nretry: 300\ndata: real\n\n"
    (event,) = events_of(data)
    assert (event.data, event.event, event.id, event.retry) == ("real", None, "7", 300)


def test_a_utf8_character_split_across_chunks_survives():
    data = "data: Crème brûlée 🍮\n\n".encode()
    assert [e.data for e in events_of(data, chunk=1)] == ["Crème brûlée 🍮"]


def test_leading_byte_order_mark_is_ignored():
    (event,) = events_of(b"\xef\xbb\xbfdata: x\n\n")
    assert event.data == "x"


def test_an_event_cut_before_its_blank_line_is_discarded_at_end_of_input():
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"complete": true}\n\ndata: {"cut": ') == [
        ServerSentEvent('{"complete": true}')
    ]
    assert decoder.pending
    assert decoder.flush() == []


def test_last_line_without_blank_line_is_not_dispatched():
    assert events_of(b"data: done\n") == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=400), max_size=12))
def test_any_chunking_of_a_recorded_stream_gives_the_same_events(cuts):
    data = recording("anthropic_tool_use.sse") + recording("openai_error_after_200.sse")
    whole = events_of(data)
    positions = sorted({min(c * 7, len(data)) for c in cuts})
    pieces, start = [], 0
    for position in [*positions, len(data)]:
        pieces.append(data[start:position])
        start = position
    assert list(decode_all(pieces)) == whole
    assert len(whole) == 21 + 3


def test_a_cr_ending_a_chunk_ends_its_line_and_a_following_lf_is_not_a_blank_line():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []  # the LF completes the CRLF: no dispatch yet
    assert [e.data for e in decoder.feed(b"\r")] == ["a\nb"]


def test_a_long_line_in_small_chunks_is_one_line():
    payload = "x" * 100_000
    data = f"data: {payload}\n\n".encode()
    (event,) = events_of(data, chunk=48)
    assert event.data == payload
    (event,) = events_of(data.replace(b"\n", b"\r\n"), chunk=47)
    assert event.data == payload


def test_a_line_still_open_keeps_the_decoder_pending_until_its_end():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: par") == [] and decoder.pending
    assert decoder.feed(b"tial") == []
    assert [e.data for e in decoder.feed(b"\n\n")] == ["partial"]
    assert not decoder.pending
