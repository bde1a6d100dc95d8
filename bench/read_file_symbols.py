"""What `read_file(symbol=...)` saves: for every top-level function and every method of the
installed Django package, the tokens read_file returns for that symbol versus the tokens of the
whole file it lives in.

Tokens are estimated as characters / 4 (deterministic, no tokenizer dependency; real BPE counts
for Python source are close to it, and the ratio does not depend on the divisor). The symbol side
is read_file's complete output (header, line numbers, notes); the whole-file side is the file's
text alone, i.e. what an agent gets from `cat` or an unwindowed read. `median_ratio_bare_span`
compares the symbol's own lines without read_file's line numbers and header, and without the
window a very long symbol gets. Target: median reduction >= 10x.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

import django

from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.read_file import ReadFileTool
from apps.tools.builtin.symbols import extract_symbols
from bench._harness import percentile, report

TARGET_MEDIAN = 10.0


def tokens(text: str) -> float:
    return max(len(text), 1) / 4


def main() -> dict:
    root = Path(django.__path__[0])
    started = time.monotonic()
    measured = asyncio.run(_measure(root))
    ratios = [m["ratio"] for m in measured]
    span_ratios = [m["span_ratio"] for m in measured]
    figures = {
        "corpus": f"django {django.__version__}, the installed package",
        "token_estimate": "characters / 4",
        "symbols": len(measured),
        "files": len({m["file"] for m in measured}),
        "failed_calls": sum(1 for m in measured if not m["ok"]),
        "ambiguous": sum(1 for m in measured if m["ambiguous"]),
        "windowed": sum(1 for m in measured if m["windowed"]),
        "median_ratio": round(statistics.median(ratios), 1),
        "p90_ratio": round(percentile(ratios, 0.9), 1),
        "p10_ratio": round(percentile(ratios, 0.1), 1),
        "median_ratio_bare_span": round(statistics.median(span_ratios), 1),
        "median_symbol_tokens": round(statistics.median(m["symbol_tokens"] for m in measured)),
        "median_file_tokens": round(statistics.median(m["file_tokens"] for m in measured)),
        "total_symbol_tokens": round(sum(m["symbol_tokens"] for m in measured)),
        "total_file_tokens": round(sum(m["file_tokens"] for m in measured)),
        "target_median_ratio": TARGET_MEDIAN,
        "meets_target": statistics.median(ratios) >= TARGET_MEDIAN,
        "seconds": round(time.monotonic() - started, 1),
    }
    table = [
        ("corpus", figures["corpus"]),
        ("symbols (functions + methods)", f"{figures['symbols']} in {figures['files']} files"),
        ("failed calls", str(figures["failed_calls"])),
        ("median reduction", f"{figures['median_ratio']}x (target >= {TARGET_MEDIAN:g}x)"),
        ("p90 reduction", f"{figures['p90_ratio']}x"),
        ("p10 reduction (worst tenth)", f"{figures['p10_ratio']}x"),
        ("median, bare span (no numbers, header)", f"{figures['median_ratio_bare_span']}x"),
        (
            "median tokens symbol / file",
            f"{figures['median_symbol_tokens']} / {figures['median_file_tokens']}",
        ),
        (
            "all symbols, tokens read",
            f"{figures['total_symbol_tokens']:,} instead of {figures['total_file_tokens']:,}",
        ),
        ("ambiguous names / windowed", f"{figures['ambiguous']} / {figures['windowed']}"),
        ("token estimate", figures["token_estimate"]),
    ]
    report("read_file_symbols", figures, table=table)
    return figures


async def _measure(root: Path) -> list[dict]:
    tool = ReadFileTool(ToolContext(root=root))
    files = sorted(root.rglob("*.py"))
    measured: list[dict] = []
    for index, path in enumerate(files, start=1):
        source = path.read_text(encoding="utf-8")
        relative = path.relative_to(root).as_posix()
        lines = source.split("\n")
        for span in extract_symbols(source, "python"):
            top_level_function = span.kind == "function" and span.parent is None
            if span.local or not (top_level_function or span.kind == "method"):
                continue
            result = await tool.execute(path=relative, symbol=span.qualified_name)
            shown = result.data.get("symbol") or {}
            first = shown.get("start_line", span.first_line)
            last = shown.get("end_line", span.end_line)
            span_text = "\n".join(lines[first - 1 : last])
            measured.append(
                {
                    "file": relative,
                    "ok": result.ok,
                    "ambiguous": bool(result.data.get("other_matches")),
                    "windowed": bool(result.data.get("windowed")),
                    "symbol_tokens": tokens(result.output),
                    "file_tokens": tokens(source),
                    "ratio": tokens(source) / tokens(result.output),
                    "span_ratio": tokens(source) / tokens(span_text),
                }
            )
        if index % 200 == 0:
            print(f"   {index}/{len(files)} files, {len(measured)} symbols", flush=True)
    return measured


if __name__ == "__main__":
    main()
