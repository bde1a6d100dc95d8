"""agentkit_site/channel_layer.py on a real Redis: a consumer's own channel costs no Redis
subscription (no SUBSCRIBE per socket open, no UNSUBSCRIBE per close), and group messages from
another process's layer still reach it; through a real WebSocket consumer too."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from channels_redis.pubsub import RedisPubSubChannelLayer

from agentkit_site.channel_layer import GroupsOnlyPubSubLayer


def _subscribed(url: str, prefix: str) -> list[bytes]:
    return redis.Redis.from_url(url).pubsub_channels(f"{prefix}*")


async def test_a_consumer_channel_is_local_and_still_gets_its_groups_messages(redis_url):
    prefix = f"t{uuid.uuid4().hex[:8]}"
    ours = GroupsOnlyPubSubLayer(hosts=[redis_url], prefix=prefix)
    theirs = RedisPubSubChannelLayer(hosts=[redis_url], prefix=prefix)  # another process's
    try:
        channel = await ours.new_channel()
        assert channel.startswith(f"{prefix}specific.")
        assert _subscribed(redis_url, prefix) == []  # no SUBSCRIBE for the consumer's channel
        await ours.group_add("task.7", channel)
        deadline = asyncio.get_running_loop().time() + 5
        while not _subscribed(redis_url, prefix):  # the group's subscription is Redis's
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.02)
        await theirs.group_send("task.7", {"type": "task.events", "events": [{"seq": 1}]})
        got = await asyncio.wait_for(ours.receive(channel), 5)
        assert got == {"type": "task.events", "events": [{"seq": 1}]}
        await ours.group_discard("task.7", channel)
    finally:
        await ours.flush()
        await theirs.flush()


async def test_a_channel_that_stops_receiving_is_forgotten(redis_url):
    layer = GroupsOnlyPubSubLayer(hosts=[redis_url], prefix=f"t{uuid.uuid4().hex[:8]}")
    try:
        channel = await layer.new_channel()
        waiting = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(0.05)
        waiting.cancel()  # what channels does when the consumer ends
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert channel not in layer._get_layer().channels
    finally:
        await layer.flush()
