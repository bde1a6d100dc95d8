"""Adjustments to the WebSocket server stack (Daphne → autobahn), applied once by asgi.py.

autobahn formats a debug line at every WebSocket connection whether or not debug logging is on:
`pformat` of its ~40 protocol settings (autobahn/websocket/protocol.py, `_connectionMade`).
That is ~0.3 ms of the serving loop per handshake — with 50 sockets opened at once, about a
quarter of the loop's time while they open and their tasks start (bench/chat_load.py). The
module's `pformat` becomes `repr`: the same information on one line, for a log line nobody
reads unless autobahn's debug logging is switched on (and for its timing objects' str()).

Twisted's TCP transport never sends in `write()`: it buffers the bytes and registers the socket
for writing (an epoll `modify`), the reactor's next pass sends them and unregisters it (a second
`modify`). Every WebSocket frame thus cost two system calls and a loop pass more than the send,
and waited for that pass: with 50 sockets streaming tokens, a frame sat behind everything else
the serving loop had ready (bench/streaming.py). `write_at_once` sends at once when nothing is
buffered and keeps Twisted's path for the rest: a partial send buffers the remainder, anything
already buffered keeps the bytes in order behind it, and a failed send leaves the bytes to
Twisted's own write, whose next pass meets the error and closes the connection as before.

`settle_heap` runs last at start-up. The channel layer is built then (its serializer imports
msgpack and cryptography), not at the first socket. And the ~130,000 objects that start-up
left (modules, classes, functions, the config) are moved out of the garbage collector's
reach: a full collection walked all of them, 30 ms on a quiet machine and up to 90 ms with 50
tasks streaming, and the serving loop — every socket — stood still meanwhile. Collections now
walk only what was allocated since.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger(__name__)


def quick_format(obj: object) -> str:
    return repr(obj)


def write_at_once(write):
    """Twisted `Connection.write` (`write`, the inherited one) that first tries to send."""

    def write_now(self, data: bytes) -> None:
        if (
            type(data) is bytes
            and data
            and not self.dataBuffer  # nothing buffered, so nothing may go before these bytes
            and not self._tempDataBuffer
            and self.connected
            and not self.disconnecting
            and not self._writeDisconnected
            and not self._writeDisconnecting
        ):
            sent = self.writeSomeData(data)
            if type(sent) is int and sent > 0:
                if sent == len(data):
                    return
                data = data[sent:]
        write(self, data)

    write_now.at_once = True
    return write_now


def tune_websocket_stack() -> None:
    _tune_twisted_tcp()
    try:
        from autobahn.websocket import protocol
    except ImportError:  # another server: nothing to adjust
        return
    if hasattr(protocol, "pformat"):
        protocol.pformat = quick_format


def _tune_twisted_tcp() -> None:
    try:
        from twisted.internet import tcp
    except ImportError:
        return
    if not getattr(tcp.Connection.write, "at_once", False):
        tcp.Connection.write = write_at_once(tcp.Connection.write)


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
