"""Context compression over a 150-turn session: prompt size per turn, total cost, and how fast the
prompt cache recovers after each compression.

The same session as bench/prompt_cache.py (real engine, python_coder skill, a read_file per turn)
at 150 turns, prompt caching on, run twice: with `compression` (threshold 12,000 tokens, keep
the first 2 and last 8 messages; summaries by the auxiliary alias at a third of the main price)
and without. Targets (issue 13): prompt tokens per turn stay bounded; total cost <= 0.5x the
uncompressed session; the turn right after each compression reads its prompt from the cache.
"""

from __future__ import annotations

import asyncio

from bench._cache_session import run_session
from bench._harness import report

TURNS = 150
COMPRESSION = {"enabled": True, "threshold_tokens": 12_000, "keep_first": 2, "keep_last": 8}


def main() -> dict:
    compressed, events = asyncio.run(run_session(TURNS, compression=COMPRESSION))
    plain, _ = asyncio.run(run_session(TURNS))
    steps = [call for call in compressed if call.kind == "step"]
    summaries = [call for call in compressed if call.kind == "summary"]
    squeezes = [e.data for e in events if e.type == "compression"]
    compress_steps = [e.data["step"] for e in events if e.type == "compression"]
    assert len(steps) == len(plain) == TURNS
    # Hit rate on the compressing turn itself and on the turn right after it.
    at, after = [], []
    for step in compress_steps:
        call, following = steps[step - 1], steps[step] if step < TURNS else None
        at.append(round(call.cache_read / call.input_tokens, 4))
        if following is not None:
            after.append(round(following.cache_read / following.input_tokens, 4))
    cost_compressed = sum(call.cost for call in compressed)
    cost_plain = sum(call.cost for call in plain)
    marks = [1, 10, 25, 50, 75, 100, 125, 150]
    rows = [
        {
            "turn": t,
            "compressed": steps[t - 1].input_tokens,
            "uncompressed": plain[t - 1].input_tokens,
        }
        for t in marks
    ]
    figures = {
        "turns": TURNS,
        "compression": COMPRESSION,
        "compressions": len(squeezes),
        "summaries_by": sorted({s["summarized_by"] for s in squeezes}),
        "max_prompt_tokens_compressed": max(call.input_tokens for call in steps),
        "max_prompt_tokens_uncompressed": max(call.input_tokens for call in plain),
        "prompt_tokens_by_turn": rows,
        "usd_compressed": round(cost_compressed, 4),
        "usd_summaries": round(sum(call.cost for call in summaries), 4),
        "usd_uncompressed": round(cost_plain, 4),
        "cost_ratio": round(cost_compressed / cost_plain, 4),
        "hit_rate_on_compression_turn": at,
        "hit_rate_turn_after_compression": after,
        "tokens_before_after": [(s["tokens_before"], s["tokens_after"]) for s in squeezes],
    }
    table = [
        (
            f"turn {row['turn']:>3}: prompt tokens",
            f"{row['compressed']:>6} vs {row['uncompressed']:>6} uncompressed",
        )
        for row in rows
    ] + [
        (
            "max prompt tokens",
            f"{figures['max_prompt_tokens_compressed']} vs {figures['max_prompt_tokens_uncompressed']}",
        ),
        ("compressions (summaries by)", f"{len(squeezes)} ({', '.join(figures['summaries_by'])})"),
        ("total cost compressed / uncompressed", f"${cost_compressed:.4f} / ${cost_plain:.4f}"),
        ("cost ratio (target <= 0.5)", f"{figures['cost_ratio']:.3f}"),
        ("hit rate on compressing turns", ", ".join(f"{r:.0%}" for r in at)),
        ("hit rate on the turn after", ", ".join(f"{r:.0%}" for r in after)),
    ]
    report("compression", figures, table=table)
    return figures


if __name__ == "__main__":
    main()
