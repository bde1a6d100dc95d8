"""CancellationToken and Interrupter: a cancel stops the current wait at once and raises the
engine's exception; other cancellations of the task still propagate."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from apps.engine.loop.cancellation import CancellationToken, Interrupter


class Stop(Exception):
    pass


async def test_interrupt_cancels_the_guarded_wait_promptly():
    interrupter = Interrupter()
    waited = asyncio.Event()

    async def long_wait():
        waited.set()
        await asyncio.sleep(30)

    async def interrupt_soon():
        await waited.wait()
        interrupter.interrupt(Stop)

    started = time.monotonic()
    helper = asyncio.create_task(interrupt_soon())
    with pytest.raises(Stop):
        await interrupter.guard(long_wait())
    await helper
    assert time.monotonic() - started < 1
    assert asyncio.current_task().cancelling() == 0  # our cancellation was taken back


async def test_after_interrupt_every_guard_and_check_raises():
    interrupter = Interrupter()
    interrupter.interrupt(Stop)
    with pytest.raises(Stop):
        interrupter.check()
    with pytest.raises(Stop):
        await interrupter.guard(asyncio.sleep(0))


async def test_guard_returns_the_result_when_not_interrupted():
    interrupter = Interrupter()

    async def value():
        return 42

    assert await interrupter.guard(value()) == 42
    interrupter.check()


async def test_a_foreign_cancellation_still_propagates():
    interrupter = Interrupter()

    async def guarded():
        await interrupter.guard(asyncio.sleep(30))

    task = asyncio.create_task(guarded())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_interrupt_while_not_waiting_takes_effect_at_the_next_guard():
    interrupter = Interrupter()
    interrupter.interrupt(Stop)
    await asyncio.sleep(0)  # no task was cancelled: this await is unaffected
    with pytest.raises(Stop):
        interrupter.check()


async def test_first_cause_wins():
    interrupter = Interrupter()

    class Other(Exception):
        pass

    interrupter.interrupt(Stop)
    interrupter.interrupt(Other)
    with pytest.raises(Stop):
        interrupter.check()


async def test_token_cancel_from_another_thread_interrupts_the_wait():
    interrupter = Interrupter()
    token = CancellationToken()
    token.subscribe(lambda reason: interrupter.interrupt(Stop))
    timer = threading.Timer(0.05, token.cancel)
    timer.start()
    started = time.monotonic()
    with pytest.raises(Stop):
        await interrupter.guard(asyncio.sleep(30))
    timer.join()
    assert time.monotonic() - started < 1


def test_token_notifies_once_and_late_subscribers_at_once():
    token = CancellationToken()
    seen = []
    unsubscribe = token.subscribe(seen.append)
    token.cancel("stop please")
    token.cancel("again")
    assert seen == ["stop please"] and token.cancelled and token.reason == "stop please"
    unsubscribe()
    late = []
    token.subscribe(late.append)
    assert late == ["stop please"]


def test_unsubscribed_listener_is_not_called():
    token = CancellationToken()
    seen = []
    token.subscribe(seen.append)()
    token.cancel()
    assert seen == []


async def test_an_interrupt_stops_only_the_task_waiting_in_its_guard_among_several():
    interrupters = []

    async def waiting(index: int) -> str:
        interrupter = Interrupter()
        interrupters.append(interrupter)
        try:
            await interrupter.guard(asyncio.sleep(0.3))
        except Stop:
            return f"{index} stopped"
        return f"{index} slept"

    tasks = [asyncio.create_task(waiting(index)) for index in range(3)]
    await asyncio.sleep(0.01)
    interrupters[1].interrupt(Stop)  # from outside the waiting task: the one in guard() stops
    assert await asyncio.gather(*tasks) == ["0 slept", "1 stopped", "2 slept"]
