"""Engine overhead per tool-call step, and peak memory of a long task.

A task of N steps: each step the model (zero latency) says one short sentence and calls a no-op
tool; after N calls it answers. Engine overhead = time of the run minus the time spent waiting
on the model's stream: the loop, events, delta batching, schema validation, loop detection,
the compression check (the model client answers `complete`, as the gateway does, so the engine
sets up a compressor), conversation bookkeeping. Measured with the scripted provider in process,
and over HTTP against the fake LLM server running in its own process.

Marginal step (the target, <= 35 µs): what one more tool-call step costs, without what a task
costs once (start, prompt, the final answer, the hook). Tasks of 10, 20, 40 and 60 steps run in
rounds; each round's least-squares slope of engine overhead against steps is one sample. Measured
on the thread's CPU time (time.thread_time), so that other processes on a shared machine do not
count; the wall-clock slope is reported beside it. The scripted provider's log of requests is
cleared after each call (it would hold every prompt of the task: the collector's work on it is
the model's, not the engine's). Figures: median and min of the round slopes, and the slopes
fitted through the per-size minimums and medians; the load average beside them.

Harness floor: a null run (null_task) makes the same model calls through the same TimedModel on
the same clock, with requests built beforehand and nothing done between the calls but reading
each stream to its response and closing it, as the engine does. Its slope, measured in the same
rounds, is what the measurement itself charges to the engine side (the clock's system calls
around each chunk, TimedModel's own generator, the stream's closing, the request log's
clearing). The marginal figures are reported raw (the target's figures, unchanged) and, beside
them, calibrated: less the null run's slope of the same round, and less its fit of minimums.

Per step: engine overhead of a 50-step task divided by its 51 model calls (fixed costs included),
on the thread's CPU time in process (the wall time per step beside it), on the wall clock over
HTTP.

plan_exec row: the same task as a plan_exec run, so every step also goes through the phase
machinery (budget and auto-advance bookkeeping before the step, the whitelist check before the
tool runs, the shell-filter binding around it); react and plan_exec tasks alternate (ABBA) so
machine load hits both alike. The target: plan_exec's per-step overhead within 10 % of react's.

Peak memory: tracemalloc over one 200-step task in process (the scripted provider's own log of
requests is cleared after each call, so the figure is the engine's and the conversation's).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from apps.engine.llm.gateway import Gateway
from apps.engine.llm.types import ToolCall
from bench._engine_task import (
    NOOP_POLICY,
    config,
    null_requests,
    null_task,
    run_task,
    script,
)
from bench._harness import report, summarize

STEPS_PER_TASK = 50
TASKS_IN_PROCESS = 60
MARGINAL_STEPS = (10, 20, 40, 60)
MARGINAL_ROUNDS = 50
WARMUP_ROUNDS = 3
TASKS_OVER_HTTP = 8
MEMORY_STEPS = 200


def per_step_us(
    samples: list[tuple[float, float, int]], steps: int, walls: list[float] | None = None
) -> dict:
    """Overhead per step from (elapsed, waited, events) samples on one clock; `walls`: the
    tasks' wall-clock times when the samples are on the CPU clock (else the samples' own)."""
    overhead = [(elapsed - waited) / (steps + 1) * 1e6 for elapsed, waited, _ in samples]
    walls = walls if walls is not None else [elapsed for elapsed, _, _ in samples]
    return {
        "overhead_us": summarize(overhead),
        "wall_us": summarize([wall / (steps + 1) * 1e6 for wall in walls]),
        "events_per_task": statistics.median(events for _, _, events in samples),
    }


async def in_process() -> tuple[dict, dict, float]:
    """(react, plan_exec, median of the paired ratios): the two kinds of task alternate, and
    each plan_exec task is compared with the react task run next to it (just before or just
    after, in turn), so that a load change on a shared machine moves both sides of a ratio alike. Overhead on the thread's CPU
    time (as the marginal step), the wall time of each task beside it."""
    cfg = config()
    gateway = Gateway.for_script(script(STEPS_PER_TASK), config=cfg)
    provider = gateway.provider(cfg.llm.main)
    samples: dict[str, list] = {"react": [], "plan_exec": []}
    walls: dict[str, list] = {"react": [], "plan_exec": []}
    for index in range(TASKS_IN_PROCESS + 3):
        # ABBA order: neither mode always runs second (after the other warmed the caches)
        for mode in ("react", "plan_exec") if index % 2 == 0 else ("plan_exec", "react"):
            started = time.perf_counter()
            sample = await run_task(
                gateway,
                cfg,
                STEPS_PER_TASK,
                mode=mode,
                clock=time.thread_time,
                after_call=provider.requests.clear,
            )
            walls[mode].append(time.perf_counter() - started)
            samples[mode].append(sample)
            provider.reset()
    # the first runs warm up imports and caches
    react, plan = samples["react"][3:], samples["plan_exec"][3:]
    ratios = [(pw - pm) / (rw - rm) for (rw, rm, _), (pw, pm, _) in zip(react, plan, strict=True)]
    return (
        per_step_us(react, STEPS_PER_TASK, walls["react"][3:]),
        per_step_us(plan, STEPS_PER_TASK, walls["plan_exec"][3:]),
        statistics.median(ratios),
    )


def slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through `points`."""
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in points)
    variance = sum((x - mean_x) ** 2 for x, _ in points)
    return covariance / variance, mean_y - covariance / variance * mean_x


def fitted(samples: dict[int, list[float]], pick) -> dict:
    per_size = {steps: pick(values) for steps, values in samples.items()}
    marginal, fixed = slope(list(per_size.items()))
    return {"marginal_us": round(marginal, 2), "fixed_us": round(fixed, 1)}


async def marginal_step() -> dict:
    """Per mode: the round slopes of engine overhead (µs) against tool-call steps, on the
    thread's CPU time and on the wall clock. react and plan_exec rounds alternate."""
    cfg = config()
    gateways = {steps: Gateway.for_script(script(steps), config=cfg) for steps in MARGINAL_STEPS}
    requests = {steps: null_requests(steps) for steps in MARGINAL_STEPS}
    clocks = {"cpu": time.thread_time, "wall": time.perf_counter}
    modes = ("react", "plan_exec", "harness")  # harness: the null run, no engine (null_task)
    raw = {
        (mode, name): {steps: [] for steps in MARGINAL_STEPS} for mode in modes for name in clocks
    }
    slopes = {key: [] for key in raw}
    for index in range(WARMUP_ROUNDS + MARGINAL_ROUNDS):
        sizes = MARGINAL_STEPS if index % 2 == 0 else MARGINAL_STEPS[::-1]
        for mode in modes:
            for name, clock in clocks.items():
                points = []
                for steps in sizes:
                    provider = gateways[steps].provider(cfg.llm.main)
                    if mode == "harness":
                        elapsed, waited, _ = await null_task(
                            gateways[steps],
                            requests[steps],
                            clock=clock,
                            after_call=provider.requests.clear,
                        )
                    else:
                        elapsed, waited, _ = await run_task(
                            gateways[steps],
                            cfg,
                            steps,
                            mode=mode,
                            clock=clock,
                            after_call=provider.requests.clear,
                        )
                    provider.reset()
                    points.append((steps, (elapsed - waited) * 1e6))
                if index < WARMUP_ROUNDS:  # imports, caches, the allocator's arenas
                    continue
                for steps, overhead in points:
                    raw[mode, name][steps].append(overhead)
                slopes[mode, name].append(slope(points)[0])
    # The machine may be shared: its load says how far CPU times are inflated (caches, cores).
    figures: dict = {
        "steps": list(MARGINAL_STEPS),
        "rounds": MARGINAL_ROUNDS,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    for (mode, name), samples in raw.items():
        figures.setdefault(mode, {})[name] = {
            "round_slopes_us": summarize(slopes[mode, name]),
            "fit_of_minimums": fitted(samples, min),
            "fit_of_medians": fitted(samples, statistics.median),
        }
    # Calibrated: the engine's figures less the harness's own, round by round (the null run
    # of the same round, on the same clock) and between the fits of minimums.
    for mode in ("react", "plan_exec"):
        for name in clocks:
            engine, null = figures[mode][name], figures["harness"][name]
            paired = [
                e - h for e, h in zip(slopes[mode, name], slopes["harness", name], strict=True)
            ]
            engine["calibrated"] = {
                "round_slopes_us": summarize(paired),
                "fit_of_minimums_us": round(
                    engine["fit_of_minimums"]["marginal_us"]
                    - null["fit_of_minimums"]["marginal_us"],
                    2,
                ),
            }
    return figures


def phase_checks_us(steps: int = 20_000) -> float:
    """What plan_exec adds to a step on its own, in a tight loop: the step's bookkeeping, the
    whitelist check of its tool call, the shell-filter binding around the call."""
    from apps.engine.plan.gate import bind_command_filter, gate_call, reset_command_filter
    from apps.engine.plan.phases import Budgets, PhaseTracker

    tracker = PhaseTracker.start(NOOP_POLICY, Budgets(10**9, 10**9, 1))
    call, known = ToolCall("c", "noop", {}), {"noop"}
    started = time.perf_counter()
    for step in range(1, steps + 1):
        tracker.begin_step(step)
        gate_call(tracker, call, known)
        reset_command_filter(bind_command_filter(tracker))
    return (time.perf_counter() - started) / steps * 1e6


async def over_http(base_url: str) -> dict:
    cfg = config(models={"main": {"provider": "openai", "model": "fake", "base_url": base_url}})
    samples = []
    async with Gateway(cfg) as gateway:
        for _ in range(TASKS_OVER_HTTP + 1):
            samples.append(await run_task(gateway, cfg, STEPS_PER_TASK))
    return per_step_us(samples[1:], STEPS_PER_TASK)


async def peak_memory() -> dict:
    cfg = config()
    gateway = Gateway.for_script(script(MEMORY_STEPS), config=cfg)
    provider = gateway.provider(cfg.llm.main)
    tracemalloc.start()
    try:
        await run_task(gateway, cfg, MEMORY_STEPS, after_call=provider.requests.clear)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {
        "steps": MEMORY_STEPS,
        "peak_kib": round(peak / 1024, 1),
        "end_kib": round(current / 1024, 1),
    }


def main() -> dict:
    from tests.fakes.llm_process import running_in_subprocess

    marginal = asyncio.run(marginal_step())
    react, plan_exec, ratio = asyncio.run(in_process())
    checks = phase_checks_us()
    figures = {
        "marginal_step": marginal,
        "steps_per_task": STEPS_PER_TASK,
        "in_process": react,
        "plan_exec_in_process": plan_exec,
        "plan_exec_overhead_ratio": round(ratio, 3),
        "plan_exec_phase_checks_us": round(checks, 2),
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "script.json"
        path.write_text(json.dumps(script(STEPS_PER_TASK)))  # JSON is YAML
        with running_in_subprocess(script=path) as url:
            figures["over_http"] = asyncio.run(over_http(f"{url}/v1"))
    figures["memory"] = asyncio.run(peak_memory())
    inproc, http, memory = figures["in_process"], figures["over_http"], figures["memory"]
    cpu, wall = marginal["react"]["cpu"], marginal["react"]["wall"]
    table = [
        (
            "marginal step, CPU (median / min of round slopes)",
            f"{cpu['round_slopes_us']['median']:.1f} / {cpu['round_slopes_us']['min']:.1f} µs"
            " (target <= 35 µs)",
        ),
        (
            "marginal step, CPU (fit of medians / of minimums)",
            f"{cpu['fit_of_medians']['marginal_us']:.1f} / "
            f"{cpu['fit_of_minimums']['marginal_us']:.1f} µs",
        ),
        (
            "harness floor, CPU (median of null-run slopes)",
            f"{marginal['harness']['cpu']['round_slopes_us']['median']:.1f} µs",
        ),
        (
            "marginal step less the floor, CPU (median of pairs / fits of min.)",
            f"{cpu['calibrated']['round_slopes_us']['median']:.1f} / "
            f"{cpu['calibrated']['fit_of_minimums_us']:.1f} µs (raw figures above)",
        ),
        ("load average (1 min) after those rounds", f"{marginal['load_average_1m']:.2f}"),
        (
            "marginal step, wall (median of round slopes)",
            f"{wall['round_slopes_us']['median']:.1f} µs",
        ),
        (
            "plan_exec marginal step, CPU (median of round slopes)",
            f"{marginal['plan_exec']['cpu']['round_slopes_us']['median']:.1f} µs",
        ),
        ("in-process overhead / step, CPU (median)", f"{inproc['overhead_us']['median']:.1f} µs"),
        ("in-process overhead / step, CPU (p90)", f"{inproc['overhead_us']['p90']:.1f} µs"),
        ("in-process wall / step (median)", f"{inproc['wall_us']['median']:.1f} µs"),
        (
            "plan_exec in-process overhead / step, CPU (median)",
            f"{plan_exec['overhead_us']['median']:.1f} µs",
        ),
        ("plan_exec / react overhead (median of pairs)", f"{ratio:.2f}x (target <= 1.10x)"),
        ("plan_exec phase checks alone / step", f"{checks:.2f} µs"),
        ("HTTP overhead / step (median)", f"{http['overhead_us']['median']:.1f} µs"),
        ("HTTP wall / step (median)", f"{http['wall_us']['median']:.1f} µs"),
        (f"peak memory, {memory['steps']}-step task", f"{memory['peak_kib']:.0f} KiB"),
    ]
    report("engine_overhead", figures, table=table)
    return figures


if __name__ == "__main__":
    main()
