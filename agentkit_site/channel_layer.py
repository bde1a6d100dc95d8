"""The channel layer: channels_redis's Redis Pub/Sub layer, without a Redis subscription per
consumer.

channels gives every consumer a channel of its own (`new_channel`), and the Pub/Sub layer
subscribes to it on Redis. agentkit's sockets receive only through groups (`task.<id>`: group
messages reach a consumer through its local queue, whatever its own channel's subscription),
and nothing sends to a consumer's own channel. Those subscriptions cost a SUBSCRIBE per socket
open and an UNSUBSCRIBE per close, and channels_redis sends them one after the other under one
lock per Redis host: with 50 sockets opened at once, a socket's `new_channel` waited 89 ms
median, 139 ms at the 90th percentile — about 40 % of the handshake (bench/chat_load.py). Here a
consumer's channel is a local queue only. A message sent to it by name from another process would
not arrive; one sent from this process would (`send` publishes; the receiving process is found by
its subscription). Groups, `group_send` and everything else are channels_redis's own.
"""

from __future__ import annotations

import asyncio
import uuid

from channels_redis.pubsub import RedisPubSubChannelLayer


class GroupsOnlyPubSubLayer(RedisPubSubChannelLayer):
    async def new_channel(self, prefix: str = "specific.") -> str:
        layer = self._get_layer()  # this event loop's layer (channels_redis keeps one per loop)
        channel = f"{layer.prefix}{prefix}{uuid.uuid4().hex}"
        layer.channels[channel] = asyncio.Queue()  # what receive() reads; no Redis SUBSCRIBE
        return channel
