"""Writing replies straight to the socket: the one place that reaches into Twisted's internals.

A read's replies leave in one ``send`` when nothing is queued before them, instead of through
``transport.write``, which queues them and waits for the reactor's next write-readiness round (two
``epoll_ctl`` calls and an event dispatch per read: a fifth of the server's CPU per small send).

It uses three parts of ``twisted.internet.tcp.Connection`` that are not public API:
``writeSomeData`` (one non-blocking send) and ``dataBuffer`` / ``_tempDataBuffer`` (what Twisted
still has queued, which must leave first). setup.cfg pins Twisted to the range that
``tests/server/test_socket_writes.py`` checks over a real loopback connection; a transport
without them (another reactor, a test double) gets plain ``write``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

_PARTS = ("writeSomeData", "dataBuffer", "_tempDataBuffer", "connected", "disconnecting")


def can_write_directly(transport: Any) -> bool:
    """Whether ``transport`` itself has the parts ``write_now`` uses. Its class must define the
    send: a wrapper (TLS) forwards unknown attributes to the socket's transport, and writing there
    would bypass it (sending a TLS connection's replies in the clear)."""
    return callable(getattr(type(transport), "writeSomeData", None)) and all(hasattr(transport, n) for n in _PARTS)


def write_now(transport: Any, data: bytes) -> int:
    """Send ``data`` at once as far as the socket takes it, queue the rest behind it; returns how
    many bytes went straight to the socket. Order is kept: with anything queued, all is queued."""
    if not transport.connected or transport.disconnecting or transport.dataBuffer or transport._tempDataBuffer:
        transport.write(data)
        return 0
    sent = transport.writeSomeData(data)
    if isinstance(sent, Exception):
        sent = 0  # the queued write below meets the error again and closes as Twisted does
    if sent < len(data):
        transport.write(data[sent:])
    return sent


def writer(transport: Any) -> Callable[[bytes], Any]:
    """The fastest correct way to write to ``transport``."""
    return partial(write_now, transport) if can_write_directly(transport) else transport.write
