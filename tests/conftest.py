from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import private_redis


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> str:
    """A real Redis: the one `make test` started (AGENTKIT_TEST_REDIS_URL), else a private one."""
    url = os.environ.get("AGENTKIT_TEST_REDIS_URL")
    if url:
        yield url
        return
    with private_redis(Path(tmp_path_factory.mktemp("redis"))) as started:
        yield started
