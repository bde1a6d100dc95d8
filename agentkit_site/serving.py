"""Adjustments to the WebSocket server stack (Daphne → autobahn), applied once by asgi.py.

autobahn formats a debug line at every WebSocket connection whether or not debug logging is on:
`pformat` of its ~40 protocol settings (autobahn/websocket/protocol.py, `_connectionMade`).
That is ~0.3 ms of the serving loop per handshake — with 50 sockets opened at once, about a
quarter of the loop's time while they open and their tasks start (bench/chat_load.py). The
module's `pformat` becomes `repr`: the same information on one line, for a log line nobody
reads unless autobahn's debug logging is switched on (and for its timing objects' str()).
"""

from __future__ import annotations


def quick_format(obj: object) -> str:
    return repr(obj)


def tune_websocket_stack() -> None:
    try:
        from autobahn.websocket import protocol
    except ImportError:  # another server: nothing to adjust
        return
    if hasattr(protocol, "pformat"):
        protocol.pformat = quick_format
