"""Model text a database can store, made so once, where it enters: the gateway (gateway.py).

Models emit text no database takes: a lone UTF-16 surrogate (`"\\ud800"` in the JSON, when a
model cuts an emoji in half) cannot be encoded as UTF-8, so SQLite's driver refuses the text and
PostgreSQL's `text` and `jsonb` refuse it too; PostgreSQL also refuses NUL (U+0000) in `text`
columns and in `jsonb` (`\\u0000`: "unsupported Unicode escape sequence"). Both become U+FFFD
(REPLACEMENT), the one policy that holds on both backends and in every column; a surrogate PAIR
is joined into the character it encodes. Every other character is kept as it came: ANSI escapes,
other control characters, U+FFFE, private-use characters are stored by both backends.

- `storable(text)`: the text itself (the same object) when it is storable, else a repaired
  copy. Cheap on the common case: an ASCII string is known to be one in O(1) (CPython) and
  checked for NUL with one memchr; other text is also encoded to UTF-8 once, which only a
  surrogate fails.
- `storable_value(value)`: the same through dicts (keys too) and lists: tool-call arguments,
  a tool result's `data`.
- `storable_call(call)`: a tool call's id, name, argument text and arguments.
- `StorableStream`: a streamed text piece by piece. The pieces of one stream are decoded one by
  one (one JSON string per chunk), so an emoji cut across two chunks arrives as two lone halves;
  a high surrogate that ends a piece is held back until the next piece says whether its low
  half follows, and the two go out joined.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from apps.engine.llm.types import ToolCall

REPLACEMENT = "\ufffd"
_SCALARS = frozenset({int, float, bool, type(None)})


def storable(text: str) -> str:
    """`text` with NUL and lone surrogates replaced by U+FFFD, surrogate pairs joined."""
    if text.isascii():  # O(1): no surrogate possible
        return text.replace("\x00", REPLACEMENT) if "\x00" in text else text
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    try:
        text.encode("utf-8")  # C speed, about 1.5 ns a character; only surrogates fail it
    except UnicodeEncodeError:
        # UTF-16 is where surrogates are at home: a pair decodes to its character, a lone half
        # to U+FFFD.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable_value(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings, numbers) with every string made storable; the
    same object when nothing had to change (checked first: the usual case builds nothing)."""
    kind = type(value)
    if kind is str:
        return storable(value)
    if kind is dict:
        for key, item in value.items():  # the usual ASCII keys and strings checked inline
            if (
                type(key) is str
                and not (key.isascii() and "\x00" not in key)
                and storable(key) is not key
            ):
                break
            item_kind = type(item)
            if item_kind is str:
                if not (item.isascii() and "\x00" not in item) and storable(item) is not item:
                    break
            elif item_kind in _SCALARS:
                continue
            elif storable_value(item) is not item:
                break
        else:
            return value
        return {
            (storable(key) if type(key) is str else key): storable_value(item)
            for key, item in value.items()
        }
    if kind is list or kind is tuple:
        for item in value:
            item_kind = type(item)
            if item_kind is str:
                if not (item.isascii() and "\x00" not in item) and storable(item) is not item:
                    break
            elif item_kind in _SCALARS:
                continue
            elif storable_value(item) is not item:
                break
        else:
            return value
        items = [storable_value(item) for item in value]
        return items if kind is list else tuple(items)
    return value


class StorableStream:
    """The pieces of one streamed text, made storable as they come (see the module docstring).
    `push(piece)` returns what may go out now; `end()` what is still held (a high surrogate
    that no low half followed: U+FFFD), "" when nothing is."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def push(self, piece: str) -> str:
        if self._held:
            piece, self._held = self._held + piece, ""
        elif piece.isascii():
            return piece.replace("\x00", REPLACEMENT) if "\x00" in piece else piece
        if piece and "\ud800" <= piece[-1] <= "\udbff":
            piece, self._held = piece[:-1], piece[-1]
        return storable(piece)

    def end(self) -> str:
        held, self._held = self._held, ""
        return storable(held) if held else ""


def storable_call(call: ToolCall) -> ToolCall:
    """`call` with its id, name, argument text and arguments storable (the same object when
    they were). Arguments parsed from an ASCII text without a `\\u` escape are storable as
    they are: only an escape or a raw character can make a NUL or a surrogate."""
    raw, name, call_id = call.raw_arguments, call.name, call.id
    if (
        raw
        and raw.isascii()
        and "\\u" not in raw
        and "\x00" not in raw
        and name.isascii()
        and "\x00" not in name
        and call_id.isascii()
        and "\x00" not in call_id
    ):
        return call
    name, call_id = storable(call.name), storable(call.id)
    arguments, raw = storable_value(call.arguments), storable(raw)
    if (
        name is call.name
        and call_id is call.id
        and arguments is call.arguments
        and raw is call.raw_arguments
    ):
        return call
    return replace(call, id=call_id, name=name, arguments=arguments, raw_arguments=raw)
