"""Gateway cost: usage priced per kind of token (uncached input, cache reads, cache writes,
output), and unset cache prices charged at the input price."""

from __future__ import annotations

import pytest

from apps.engine.config import ModelPrice
from apps.engine.llm import Gateway, Usage, cost_of
from tests.engine.llm.conftest import ask, config_for


async def test_cost_prices_uncached_input_cache_reads_writes_and_output_separately(answering):
    price = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    entry = answering.model_entry("anthropic", price=price)
    answering.set_script(
        [
            {
                "text": "ok",
                "usage": {
                    "input_tokens": 10_000,
                    "output_tokens": 1_000,
                    "cache_read_tokens": 6_000,
                    "cache_write_tokens": 2_000,
                },
            }
        ]
    )
    async with Gateway(config_for(answering, {"main": entry})) as gateway:
        response = await gateway.complete(ask())
    assert response.usage == Usage(10_000, 1_000, 6_000, 2_000)
    expected = (2_000 * 3.0 + 6_000 * 0.3 + 2_000 * 3.75 + 1_000 * 15.0) / 1e6
    assert response.cost == pytest.approx(expected)


def test_unset_cache_prices_are_charged_at_the_input_price():
    price = ModelPrice.model_validate({"input": 2.0, "output": 8.0})
    usage = Usage(input_tokens=1_000_000, output_tokens=0, cache_read_tokens=500_000)
    assert cost_of(usage, price) == pytest.approx(2.0)
    explicit_free = ModelPrice.model_validate({"input": 2.0, "cache_read": 0.0})
    assert cost_of(usage, explicit_free) == pytest.approx(1.0)
