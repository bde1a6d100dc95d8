"""The recorders' ordered channel-layer sends (apps/tasks/events/group_publish.py) through a real
Redis Pub/Sub layer: every message arrives once, each group's in order, more than one batch's
worth included; any other layer gets the same order; an unreachable Redis neither raises nor
leaves `wait_sent` hanging."""

from __future__ import annotations

import asyncio

from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer

from apps.tasks.events.group_publish import MAX_BATCH, group_publisher
from tests.support import free_port


async def _received(layer, channel: str, count: int) -> list[dict]:
    messages = []
    async with asyncio.timeout(10):
        while len(messages) < count:
            messages.append(await layer.receive(channel))
    return messages


def _messages(count: int) -> list[tuple[str, dict]]:
    """Interleaved over three groups, as several tasks' flushes are."""
    return [
        (f"task.{i % 3}", {"type": "task.events", "events": [{"seq": i // 3, "n": i}]})
        for i in range(count)
    ]


async def test_every_message_reaches_the_redis_subscribers_once_each_group_in_order(redis_url):
    layer = RedisPubSubChannelLayer(hosts=[redis_url], prefix=f"gp{free_port()}")
    try:
        channel = await layer.new_channel()
        for group in ("task.0", "task.1", "task.2"):
            await layer.group_add(group, channel)
        publisher = group_publisher(layer)
        assert group_publisher(layer) is publisher  # one per layer and loop
        sent = _messages(2 * MAX_BATCH + 7)
        tickets = []
        for group, message in sent[:10]:
            tickets.append(publisher.publish(group, message))
        await asyncio.sleep(0)  # a drain under way while more queue up
        for group, message in sent[10:]:
            tickets.append(publisher.publish(group, message))
        assert tickets == list(range(tickets[0], tickets[0] + len(sent)))
        await publisher.wait_sent(tickets[-1])
        got = await _received(layer, channel, len(sent))
        assert sorted(m["events"][0]["n"] for m in got) == list(range(len(sent)))
        for group in range(3):
            seqs = [m["events"][0]["seq"] for m in got if m["events"][0]["n"] % 3 == group]
            assert seqs == sorted(seqs) and len(seqs) == len(set(seqs))
    finally:
        await layer.flush()


async def test_another_layer_gets_group_send_in_the_same_order():
    layer = InMemoryChannelLayer()
    channel = await layer.new_channel()
    await layer.group_add("task.0", channel)
    publisher = group_publisher(layer)
    last = 0
    for i in range(20):
        last = publisher.publish("task.0", {"type": "task.events", "events": [{"n": i}]})
    await publisher.wait_sent(last)
    got = [(await layer.receive(channel))["events"][0]["n"] for _ in range(20)]
    assert got == list(range(20))


async def test_an_unreachable_redis_is_logged_and_waiting_for_it_ends(caplog):
    layer = RedisPubSubChannelLayer(hosts=[f"redis://127.0.0.1:{free_port()}/0"])
    publisher = group_publisher(layer)
    ticket = publisher.publish("task.9", {"type": "task.events", "events": [{"n": 1}]})
    async with asyncio.timeout(10):
        await publisher.wait_sent(ticket)
    assert "channel-layer send of 1 messages" in caplog.text
    await layer.flush()
