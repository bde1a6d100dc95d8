"""Prompt-cache accounting as the services do it (used by the scripted model and the fake server)."""

from __future__ import annotations

from apps.engine.llm.cachesim import BreakpointCache, CacheBlock, PrefixCache, estimate_tokens


def text(tokens: int, seed: str = "a") -> str:
    return (seed * 4 * tokens)[: 4 * tokens]


def test_token_estimate_is_four_characters_per_token():
    assert (estimate_tokens(""), estimate_tokens("abcd"), estimate_tokens("abcde")) == (0, 1, 2)


def test_breakpoint_prefix_is_written_then_read():
    cache = BreakpointCache(min_tokens=1024)
    blocks = [CacheBlock(text(1500), breakpoint=True), CacheBlock(text(100, "v"))]
    first = cache.account(blocks)
    assert (first.input_tokens, first.cache_write_tokens, first.cache_read_tokens) == (
        1600,
        1500,
        0,
    )
    second = cache.account(blocks)
    assert (second.cache_read_tokens, second.cache_write_tokens) == (1500, 0)
    assert second.uncached_tokens == 100


def test_prefix_shorter_than_the_minimum_is_never_cached():
    cache = BreakpointCache(min_tokens=1024)
    blocks = [CacheBlock(text(1000), breakpoint=True)]
    cache.account(blocks)
    assert cache.account(blocks).cache_read_tokens == 0


def test_changed_stable_block_misses_and_rewrites():
    cache = BreakpointCache(min_tokens=100)
    cache.account([CacheBlock(text(200, "a"), breakpoint=True)])
    usage = cache.account([CacheBlock(text(200, "b"), breakpoint=True)])
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (0, 200)


def test_growing_conversation_reads_the_previous_breakpoint_and_writes_the_rest():
    cache = BreakpointCache(min_tokens=100)
    system = CacheBlock(text(300), breakpoint=True)
    turn1 = [system, CacheBlock(text(50, "u"), breakpoint=True)]
    cache.account(turn1)
    turn2 = [system, CacheBlock(text(50, "u")), CacheBlock(text(60, "t"), breakpoint=True)]
    usage = cache.account(turn2)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (350, 60)


def test_no_breakpoint_means_no_caching():
    cache = BreakpointCache(min_tokens=1)
    blocks = [CacheBlock(text(2000))]
    cache.account(blocks)
    assert cache.account(blocks).cache_read_tokens == 0


def test_automatic_prefix_cache_starts_at_1024_tokens_in_128_token_steps():
    cache = PrefixCache()
    prompt = text(1500)
    assert cache.account(prompt).cache_read_tokens == 0
    assert cache.account(prompt).cache_read_tokens == 1024 + 3 * 128
    # Same first 1200 tokens, different tail: the cached part stops at the last whole step.
    other = prompt[: 4 * 1200] + text(300, "z")
    assert cache.account(other).cache_read_tokens == 1152


def test_automatic_prefix_cache_ignores_short_prompts():
    cache = PrefixCache()
    cache.account(text(1000))
    assert cache.account(text(1000)).cache_read_tokens == 0
