"""Sandbox start overhead per command: `true` run through each working backend (and with the
Landlock layer) vs unconfined, median over 50 runs. The overhead is what every shell tool call
and verification command pays on top of the command itself."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from apps.engine.sandbox import Sandbox, landlock_abi, probe_backends
from bench._harness import report, summarize

RUNS = 50
WARMUP = 3


def variants() -> list[tuple[str, Sandbox]]:
    out = [("unconfined", Sandbox(mode="off"))]
    for probe in probe_backends():
        if probe.available:
            out.append((probe.name, Sandbox(backend=probe.name)))
    if landlock_abi() > 0:
        for probe in probe_backends():
            if probe.available and probe.name in ("bwrap", "unshare"):
                layered = Sandbox(backend=probe.name, landlock_layer=True)
                out.append((layered.label, layered))
    return out


async def measure(sandbox: Sandbox, workspace: Path) -> list[float]:
    for _ in range(WARMUP):
        await sandbox.run(["true"], workspace, timeout=30)
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        result = await sandbox.run(["true"], workspace, timeout=30)
        times.append((time.perf_counter() - started) * 1000)
        if result.exit_code != 0:
            raise RuntimeError(f"{sandbox.label}: `true` failed: {result.stderr.strip()}")
    return times


async def _run() -> dict:
    figures: dict = {"runs": RUNS, "unit": "ms", "command": "true", "backends": {}}
    probes = {p.name: {"available": p.available, "detail": p.detail} for p in probe_backends()}
    figures["probes"] = probes
    with tempfile.TemporaryDirectory(prefix="agentkit-bench-") as tmp:
        workspace = Path(tmp)
        baseline = None
        for name, sandbox in variants():
            print(f"   {name}: {RUNS} runs ...", flush=True)
            times = await measure(sandbox, workspace)
            stats = {
                k: round(v, 3) if isinstance(v, float) else v for k, v in summarize(times).items()
            }
            if baseline is None:
                baseline = statistics.median(times)
                figures["unconfined"] = stats
            else:
                stats["overhead_median"] = round(statistics.median(times) - baseline, 3)
                figures["backends"][name] = stats
    return figures


def main() -> dict:
    figures = asyncio.run(_run())
    base = figures["unconfined"]["median"]
    table = [("unconfined `true` (median)", f"{base:.2f} ms")]
    for name, stats in figures["backends"].items():
        table.append(
            (
                f"{name} (median, p90)",
                f"{stats['median']:.2f} ms, {stats['p90']:.2f} ms  "
                f"-> +{stats['overhead_median']:.2f} ms per command",
            )
        )
    report("sandbox_overhead", figures, table=table)
    return figures


if __name__ == "__main__":
    main()
