"""agentkit_site/serving.py: Twisted's TCP transport (under Daphne) sends a write at once when
nothing is buffered, and keeps its own buffering, in order, for what the socket cannot take."""

from __future__ import annotations

import socket

import pytest
from twisted.internet import tcp
from twisted.internet.protocol import Protocol

import agentkit_site.asgi  # noqa: F401  (applies tune_websocket_stack, as Daphne loads it)


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    conn = tcp.Connection(ours, Protocol())
    conn.connected = 1
    yield conn, theirs
    conn.stopWriting()  # unregisters from the (never run) reactor if a write registered it
    ours.close()
    theirs.close()


def _read_all(sock: socket.socket) -> bytes:
    got = b""
    while True:
        try:
            part = sock.recv(1 << 20)
        except BlockingIOError:
            return got
        if not part:
            return got
        got += part


def test_a_write_goes_out_without_waiting_for_the_reactor(pair):
    conn, theirs = pair
    conn.write(b"frame one")
    conn.write(b"frame two")
    assert _read_all(theirs) == b"frame oneframe two"  # no reactor pass ran
    assert not conn.dataBuffer and not conn._tempDataBuffer


def test_what_the_socket_cannot_take_is_buffered_and_sent_in_order(pair):
    conn, theirs = pair
    big = bytes(range(256)) * 40_000  # ~10 MB: more than the socket buffers hold
    conn.write(big)
    conn.write(b"after")  # behind the buffered rest, never before it
    assert conn.dataBuffer or conn._tempDataBuffer
    got = _read_all(theirs)
    while conn.dataBuffer or conn._tempDataBuffer:
        assert conn.doWrite() is None  # what the reactor does when the socket is writable
        got += _read_all(theirs)
    got += _read_all(theirs)
    assert got == big + b"after"


def test_a_write_after_the_connection_closed_is_dropped_as_before(pair):
    conn, theirs = pair
    conn.connected = 0
    conn.write(b"late")
    assert _read_all(theirs) == b""
