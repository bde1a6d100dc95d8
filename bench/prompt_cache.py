"""Prompt caching over a long tool-using task: input cost with caching vs without, and how much of
each warm turn's prompt is read from the cache.

A 50-turn task of the real engine (shipped python_coder skill, every builtin tool offered, a
read_file call per turn over a generated package, the runner's repository map of that package in
the system prompt) against the fake LLM server's Anthropic cache accounting. Run twice: `prompt_cache.enabled: true` (stable block + moving breakpoint) and
`false` (plain prompt). Input cost uses Anthropic's multipliers: writes 1.25x, reads 0.1x.
Targets (issue 13): >= 85 % input-cost reduction; >= 97 % of warm-turn input tokens from cache.
A warm turn can at most read the whole previous prompt; what it adds (the model's last reply and
the tool result) is new. So the warm-turn hit rate is bounded by 1 - added/prompt, reported as
the ceiling next to the measured rate.
"""

from __future__ import annotations

import asyncio

from bench._cache_session import input_cost_units, run_session
from bench._harness import report

TURNS = 50


def main() -> dict:
    cached, _ = asyncio.run(run_session(TURNS, cache=True))
    plain, _ = asyncio.run(run_session(TURNS, cache=False))
    assert len(cached) == len(plain) == TURNS
    with_cache = sum(input_cost_units(call) for call in cached)
    without = sum(input_cost_units(call) for call in plain)
    warm = cached[1:]
    warm_input = sum(call.input_tokens for call in warm)
    warm_read = sum(call.cache_read for call in warm)
    # The most a warm turn can read is the whole previous prompt (the tokens added since were
    # never sent before): this is how much of that ceiling the caching reached.
    ceiling = sum(prev.input_tokens for prev in cached[:-1])
    per_turn = [round(call.cache_read / call.input_tokens, 4) for call in cached]
    figures = {
        "turns": TURNS,
        "prompt_tokens_first_turn": cached[0].input_tokens,
        "prompt_tokens_last_turn": cached[-1].input_tokens,
        "input_tokens_total": sum(call.input_tokens for call in cached),
        "cache_read_tokens_total": sum(call.cache_read for call in cached),
        "cache_write_tokens_total": sum(call.cache_write for call in cached),
        "input_cost_units_with_cache": round(with_cache, 1),
        "input_cost_units_without_cache": round(without, 1),
        "input_cost_reduction": round(1 - with_cache / without, 4),
        "warm_turn_hit_rate": round(warm_read / warm_input, 4),
        "min_warm_turn_hit_rate": min(per_turn[1:]),
        "warm_turn_ceiling_hit_rate": round(ceiling / warm_input, 4),
        "share_of_previous_prompt_read": round(warm_read / ceiling, 4),
        "usd_with_cache": round(sum(call.cost for call in cached), 4),
        "usd_without_cache": round(sum(call.cost for call in plain), 4),
        "hit_rate_per_turn": per_turn,
    }
    table = [
        ("turns", str(TURNS)),
        (
            "prompt tokens, turn 1 -> turn 50",
            f"{cached[0].input_tokens} -> {cached[-1].input_tokens}",
        ),
        ("input cost with cache (x base price)", f"{with_cache:,.0f}"),
        ("input cost without cache", f"{without:,.0f}"),
        ("input-cost reduction (target >= 85 %)", f"{figures['input_cost_reduction']:.1%}"),
        ("warm-turn tokens read from cache (>= 97 %)", f"{figures['warm_turn_hit_rate']:.1%}"),
        ("ceiling: previous prompt / this prompt", f"{figures['warm_turn_ceiling_hit_rate']:.1%}"),
        ("share of the previous prompt read", f"{figures['share_of_previous_prompt_read']:.1%}"),
        ("lowest warm-turn hit rate (turn 2)", f"{figures['min_warm_turn_hit_rate']:.1%}"),
        (
            "USD with / without cache (incl. output)",
            f"{figures['usd_with_cache']} / {figures['usd_without_cache']}",
        ),
    ]
    report("prompt_cache", figures, table=table)
    return figures


if __name__ == "__main__":
    main()
