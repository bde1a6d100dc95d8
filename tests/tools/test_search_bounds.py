"""search cannot stall the server: pathological patterns, globs and .gitignore rules return
within 2 s while another task on the same event loop keeps running, every search has a wall-time
bound, files of any size are read in bounded chunks, and a pattern RE2 cannot run is a clear
error.

The ticker stands in for a task streaming to a browser: it must get the event loop every few
milliseconds. With Python's `re` in a worker thread the backtracking holds the GIL for seconds
(the sizes below take seconds to minutes with `re`), so these tests fail without a linear-time engine."""

from __future__ import annotations

import asyncio
import time
from itertools import pairwise

import pytest

from apps.engine.llm import Gateway
from apps.engine.tools import ToolSet
from apps.tools.builtin.context import ToolContext
from apps.tools.builtin.search import SearchTool
from tests.engine.llm.conftest import ask, config_for
from tests.fakes.llm_server import FakeLLMServer

MAX_SECONDS = 2.0
MAX_TICK_GAP = 0.2  # the ticker asks for 10 ms; a loaded 2-core machine may add a little


def write(root, relative: str, text: str = "") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def while_ticking(work):
    """Run `work` (an awaitable) next to a ticker; (result, seconds it took, largest tick gap)."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not done.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    started = time.monotonic()
    try:
        result = await work
    finally:
        elapsed = time.monotonic() - started
        done.set()
        await ticking
    return result, elapsed, max(gaps)


@pytest.mark.parametrize(
    ("pattern", "line"),
    [
        (r"(a+)+$", "a" * 23 + "!"),
        (r"(x+x+)+y", "x" * 24),
        (r"^(\w+\s?)*$", "word " * 8 + "word!" + "a" * 12),
        (r"(a|aa)+$", "a" * 40 + "!"),
    ],
    ids=["nested-plus", "overlapping-plus", "words", "alternation"],
)
async def test_pathological_pattern_returns_quickly_while_another_task_keeps_running(
    call, workspace, pattern, line
):
    write(workspace, "victim.txt", f"{line}\nneedle\n{line}\n")

    result, elapsed, gap = await while_ticking(call("search", pattern=pattern))

    assert result.ok, result.error
    assert elapsed < MAX_SECONDS
    assert gap < MAX_TICK_GAP


@pytest.mark.parametrize(
    ("glob", "names"),
    [
        ("*a*a*a*a*a*a*a*b", ["a" * 45 + ".txt", "a" * 46 + ".txt", "a" * 47 + ".txt"]),
        ("/".join(["**"] * 12) + "/x", ["/".join(["d"] * 16) + "/y"]),
    ],
    ids=["stars", "deep-double-star"],
)
async def test_pathological_glob_returns_quickly_while_another_task_keeps_running(
    call, workspace, glob, names
):
    for name in names:
        write(workspace, name, "needle\n")

    result, elapsed, gap = await while_ticking(call("search", glob=glob, pattern="needle"))

    assert result.ok, result.error
    assert elapsed < MAX_SECONDS
    assert gap < MAX_TICK_GAP


async def test_hostile_gitignore_returns_quickly_while_another_task_keeps_running(call, workspace):
    rules = ["*a*a*a*a*a*a*a*b", "/".join(["**"] * 12) + "/x", "**/d/**/d/**/d/**/d/**/z"]
    write(workspace, ".gitignore", "\n".join(rules) + "\n")
    write(workspace, "a" * 45 + ".txt", "needle\n")
    write(workspace, "/".join(["d"] * 16) + "/y", "needle\n")

    result, elapsed, gap = await while_ticking(call("search", pattern="needle"))

    assert result.ok
    assert [line.split(":")[0] for line in result.output.splitlines()] == [
        "a" * 45 + ".txt",
        "/".join(["d"] * 16) + "/y",
    ]
    assert elapsed < MAX_SECONDS
    assert gap < MAX_TICK_GAP


async def test_an_llm_stream_keeps_flowing_while_a_pathological_search_runs(call, workspace):
    """The real thing: a streamed answer from the fake LLM server (HTTP, SSE, the gateway) on the
    same event loop as a search for `(a+)+$` and a glob of nested stars over long names."""
    write(workspace, "victim.txt", "a" * 23 + "!\n")
    write(workspace, "a" * 45 + ".txt", "needle\n")
    words = [f"word{i}" for i in range(150)]
    with FakeLLMServer([" ".join(words)], tokens_per_second=60) as server:
        async with Gateway(config_for(server, {"main": "openai"})) as gateway:
            arrivals: list[float] = []
            searching: list[tuple[float, float]] = []

            async def stream() -> str:
                texts = []
                async for delta in gateway.stream(ask()):
                    arrivals.append(time.monotonic())
                    if delta.response is None:
                        texts.append(delta.text)
                return "".join(texts)

            async def searches() -> list:
                while len(arrivals) < 5:  # the stream is flowing
                    await asyncio.sleep(0.01)
                results = []
                for arguments in (
                    {"pattern": r"(a+)+$"},
                    {"glob": "*a*a*a*a*a*a*a*b", "pattern": "needle"},
                ):
                    started = time.monotonic()
                    results.append(await call("search", **arguments))
                    searching.append((started, time.monotonic()))
                return results

            text, results = await asyncio.gather(stream(), searches())

    assert text == " ".join(words)
    assert all(result.ok for result in results)
    assert all(end - start < MAX_SECONDS for start, end in searching)
    first, last = searching[0][0], searching[-1][1]
    before = max(t for t in arrivals if t < first)
    after = min(t for t in arrivals if t > last)  # the searches ran in the middle of the stream
    window = [t for t in arrivals if before <= t <= after]
    # deltas come every ~20 ms; a search holding the loop (or the GIL) would leave a gap as long
    assert max(b - a for a, b in pairwise(window)) < MAX_TICK_GAP + 0.1


async def test_a_search_stops_at_its_time_limit_and_says_how_to_narrow_it(workspace):
    for index in range(20):
        write(workspace, f"src/f{index}.py", "needle\n")
    tools = ToolSet([SearchTool(ToolContext(root=workspace), time_limit=0.0)])

    result = await tools.safe_execute("search", {"pattern": "needle"})

    assert result.ok
    assert result.data["timed_out"] is True
    assert "Search stopped after 0 s" in result.output
    assert "results are partial. Narrow the path or the pattern." in result.output


def test_the_default_time_limit_is_ten_seconds_and_the_description_says_so(workspace):
    tool = SearchTool(ToolContext(root=workspace))

    assert tool.time_limit == 10.0
    assert "stops after 10 s" in tool.description


@pytest.mark.parametrize(
    ("pattern", "feature"),
    [(r"(a)\1", "backreference"), (r"foo(?=bar)", "lookahead"), (r"(?<!x)y", "lookbehind")],
)
async def test_patterns_re2_cannot_run_are_a_clear_error(call, pattern, feature):
    result = await call("search", pattern=pattern)

    assert result.error_code == "unsupported_regex", feature
    assert "linear time" in result.error
    assert "Rewrite the pattern without them" in result.error


async def test_invalid_regex_stays_an_invalid_regex_error(call):
    result = await call("search", pattern="(unclosed")

    assert result.error_code == "invalid_regex"


async def test_overlong_pattern_is_refused_by_the_schema(call):
    result = await call("search", pattern="a" * 2_001)

    assert not result.ok
    assert result.error_code != "tool_execution_error"


async def test_anchors_match_at_every_line_of_a_file(call, workspace):
    write(workspace, "a.py", "foo\nbar foo\nfoo bar\n")

    ends = await call("search", pattern="foo$")
    starts = await call("search", pattern="^foo")

    assert ends.output.splitlines() == ["a.py:1:foo", "a.py:2:bar foo"]
    assert starts.output.splitlines() == ["a.py:1:foo", "a.py:3:foo bar"]


async def test_files_over_the_read_limit_are_searched_and_read_file_points_there(call, workspace):
    line = "filler line that does not match anything at all\n"
    count = 11 * 1024 * 1024 // len(line) + 1
    (workspace / "big.log").write_text(line * count + "the needle is here\n" + line)

    found = await call("search", pattern="needle")
    refused = await call("read_file", path="big.log")

    assert found.output.splitlines() == [f"big.log:{count + 1}:the needle is here"]
    assert refused.error_code == "file_too_large"
    assert "search(pattern=..., path='big.log')" in refused.error


async def test_a_huge_line_is_searched_in_pieces(call, workspace):
    (workspace / "min.js").write_text("x" * 3_000_000 + "needle" + "\nnext needle\n")

    result = await call("search", pattern="needle")

    assert [entry.split(":")[:2] for entry in result.output.splitlines()] == [
        ["min.js", "1"],
        ["min.js", "2"],
    ]


async def test_a_glob_that_cannot_be_compiled_is_a_clear_error(call):
    result = await call("search", glob="src/[z-a].py")

    assert result.error_code == "invalid_glob"
    assert "'**/*.py'" in result.error
