"""The fake LLM server (llm_server.py) in a process of its own: `python -m
tests.fakes.llm_server --port 8765 [--script FILE] [--ttft S] [--tps N]` (`main`), and
`running_in_subprocess(...)`, which does that for benchmarks (no GIL shared with the client; no
faults there)."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.fakes.llm_server import FakeLLMServer


# ── running it elsewhere ───────────────────────────────────────────────────────────────────────
@contextlib.contextmanager
def running_in_subprocess(
    *,
    script: str | os.PathLike[str] | None = None,
    ttft: float = 0.0,
    tps: float | None = None,
    record_chunks: bool = False,
) -> Iterator[str]:
    """The server in its own Python process (benchmarks: no GIL shared with the client).
    Yields its base URL. Faults and the Python control API are not available this way."""
    command = [sys.executable, "-m", "tests.fakes.llm_server", "--port", "0", "--ttft", str(ttft)]
    if script is not None:
        command += ["--script", str(script)]
    if tps is not None:
        command += ["--tps", str(tps)]
    if record_chunks:
        command.append("--record-chunks")
    root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        found = re.search(r"http://\S+", line)
        if not found:
            raise RuntimeError(f"the fake LLM server did not start (it printed {line!r})")
        yield found.group()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake OpenAI + Anthropic LLM server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--script", help="script YAML (the scripted provider's format)")
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds before the first token")
    parser.add_argument("--tps", type=float, default=None, help="tokens per second")
    parser.add_argument("--api-key", default=None, help="refuse requests without this key")
    parser.add_argument(
        "--record-chunks", action="store_true", help="keep chunk send times (GET /_chunks)"
    )
    args = parser.parse_args(argv)
    server = FakeLLMServer(
        args.script,
        ttft=args.ttft,
        tokens_per_second=args.tps,
        api_key=args.api_key,
        host=args.host,
        port=args.port,
        record_chunks=args.record_chunks,
    ).start()
    print(
        f"fake LLM server on {server.url} (OpenAI base_url {server.openai_base_url}, "
        f"Anthropic base_url {server.anthropic_base_url}); Ctrl-C stops it",
        flush=True,
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
