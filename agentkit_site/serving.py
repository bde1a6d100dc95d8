"""Start-up work for the serving process, applied once by asgi.py.

`settle_heap` runs last at start-up. The channel layer is built then (its serializer imports
msgpack and cryptography), not at the first socket. And the ~130,000 objects that start-up
left (modules, classes, functions, the config) are moved out of the garbage collector's
reach: a full collection walked all of them, 30 ms on a quiet machine and up to 90 ms with 50
tasks streaming, and the serving loop — every socket — stood still meanwhile. Collections now
walk only what was allocated since.

The WebSocket server stack (Daphne → autobahn → Twisted) runs as shipped: this module once
replaced Twisted's `tcp.Connection.write` and autobahn's `protocol.pformat` to shave serving-loop
time on one process; issue 29 removed both (an upgrade could break them silently) — a team that
needs more sockets adds web processes (`make cluster`, docs/deployment.md).
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def settle_heap() -> None:
    """The last step of start-up (asgi.py): build what the first socket would, then freeze the
    start-up heap (`gc.freeze`: never collected, never walked again)."""
    try:
        from channels.layers import get_channel_layer

        get_channel_layer()  # builds the layer (no connection yet): its imports happen now
    except Exception:  # a broken layer setting: the first socket reports it, as before
        log.warning("channel layer could not be built at start-up", exc_info=True)
    gc.collect()  # what start-up left as garbage goes now, not frozen forever
    gc.freeze()
