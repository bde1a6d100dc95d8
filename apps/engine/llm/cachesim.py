"""Approximate token counts and prompt-cache accounting like the hosted services do it.

Used by the scripted provider (so usage and cost code paths see cache reads offline) and by the
fake LLM server in tests. Pure: text in, numbers out. A "token" here is 4 characters, the usual
rule of thumb for English and code; nothing depends on the exact figure.

Two accounting rules:

- `BreakpointCache` (Anthropic): the prompt is a sequence of blocks (tools, then system blocks,
  then message content blocks); some blocks carry a breakpoint (`cache_control`). A request reads
  the longest prefix, ending at a block boundary, that an earlier request wrote; it writes the
  prefix up to each of its breakpoints that is at least `min_tokens` long and not already read.
- `PrefixCache` (OpenAI and most OpenAI-compatible hosts): automatic. Prompts of at least
  `min_tokens` (1024) are cached in `step` (128) token increments; `cached_tokens` is the longest
  such increment-aligned prefix seen before.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Rough token count of `text` (0 for an empty string)."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass(frozen=True, slots=True)
class CacheBlock:
    text: str
    breakpoint: bool = False


@dataclass(frozen=True, slots=True)
class CacheUsage:
    input_tokens: int  # every prompt token, cached ones included
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def uncached_tokens(self) -> int:
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens


class _LRU:
    """Digest store with a size bound, so a long-running fake server does not grow forever."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[bytes, int] = OrderedDict()

    def get(self, key: bytes) -> int | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: bytes, value: int) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()


class BreakpointCache:
    """Explicit breakpoints (Anthropic `cache_control`). Not thread-safe: one per event loop."""

    def __init__(self, *, min_tokens: int = 1024, lookback_blocks: int = 20, capacity: int = 4096):
        self.min_tokens = min_tokens
        self.lookback_blocks = lookback_blocks
        self._store = _LRU(capacity)

    def reset(self) -> None:
        self._store.clear()

    def account(self, blocks: Sequence[CacheBlock]) -> CacheUsage:
        digest = hashlib.sha256()
        boundaries: list[tuple[bytes, int, bool]] = []  # (prefix digest, prefix tokens, breakpoint)
        chars = 0
        for block in blocks:
            digest.update(len(block.text).to_bytes(8, "big"))
            digest.update(block.text.encode("utf-8", "surrogatepass"))
            chars += len(block.text)
            boundaries.append((digest.copy().digest(), _tokens(chars), block.breakpoint))
        total = _tokens(chars)
        breakpoints = [i for i, (_, _, is_bp) in enumerate(boundaries) if is_bp]
        if not breakpoints:
            return CacheUsage(total)

        # Read: the longest boundary an earlier request wrote, looking back from each breakpoint.
        read = 0
        for bp in breakpoints:
            for i in range(bp, max(-1, bp - self.lookback_blocks), -1):
                key, tokens, _ = boundaries[i]
                if tokens > read and self._store.get(key) is not None:
                    read = tokens
                    break
        # Write: every breakpoint prefix long enough to be cached; billed beyond what was read.
        written_up_to = read
        for bp in breakpoints:
            key, tokens, _ = boundaries[bp]
            if tokens >= self.min_tokens:
                self._store.put(key, tokens)
                written_up_to = max(written_up_to, tokens)
        return CacheUsage(total, cache_read_tokens=read, cache_write_tokens=written_up_to - read)


class PrefixCache:
    """Automatic prefix caching (OpenAI). Not thread-safe: one per event loop."""

    def __init__(self, *, min_tokens: int = 1024, step: int = 128, capacity: int = 65536):
        self.min_tokens = min_tokens
        self.step = step
        self._store = _LRU(capacity)

    def reset(self) -> None:
        self._store.clear()

    def account(self, prompt: str) -> CacheUsage:
        total = estimate_tokens(prompt)
        if total < self.min_tokens:
            return CacheUsage(total)
        cached = 0
        digest = hashlib.sha256()
        done = 0
        keys = []
        for tokens in range(self.min_tokens, total + 1, self.step):
            end = tokens * CHARS_PER_TOKEN
            digest.update(prompt[done:end].encode("utf-8", "surrogatepass"))
            done = end
            key = digest.copy().digest()
            keys.append((key, tokens))
            if self._store.get(key) is not None:
                cached = tokens
        for key, tokens in keys:
            self._store.put(key, tokens)
        return CacheUsage(total, cache_read_tokens=cached)


def _tokens(chars: int) -> int:
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
