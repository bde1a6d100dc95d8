"""The real-model tier: one llama.cpp server (tests/realmodel/llama.py) per test process."""

from __future__ import annotations

import pytest

from tests.realmodel import llama


@pytest.fixture(scope="session")
def llama_server() -> llama.LlamaServer:
    """SmolLM2-135M behind llama.cpp's server on a free port, 1 thread, a 2048-token window."""
    return llama.start(n_ctx=2048, threads=1)


from tests.tasks.conftest import config_file  # noqa: E402,F401  (the runner tests' fixture)
