"""The control channel between the proxy's supervisor and one worker (``--workers N``).

One Unix socket pair per worker, made by the supervisor; the worker finds its end as file
descriptor ``WORKER_FD``. Messages are JSON objects, one a line. A message may carry file
descriptors (a listening socket the worker is to accept on): they travel as SCM_RIGHTS with the
message's bytes, and its ``fds`` field says how many of the ones received are its own, in order.
A message may carry a payload of bytes (a worker's metrics exposition, a megabyte with thousands
of groups): its ``bytes`` field says how many follow the line, sent as they are, since
JSON-escaping them held a worker's reactor for milliseconds per scrape; the receiver finds them
as ``message["payload"]``. Both ends are our own processes, but a line and a payload are still
bounded (``MAX_LINE``, ``MAX_PAYLOAD``).

What the messages are is the business of ``workers`` (the supervisor) and ``server`` (a worker);
this module only moves them.
"""

from __future__ import annotations

import collections
import json
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.interfaces import IFileDescriptorReceiver
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.protocols.basic import LineReceiver
from zope.interface import implementer

__all__ = ["MAX_LINE", "MAX_PAYLOAD", "WORKER_FD", "Control", "Message"]

log = Logger()

#: The descriptor a worker process finds its end of the channel on.
WORKER_FD = 3
#: The longest message line, and the largest payload (a worker's metrics exposition is the largest).
MAX_LINE = 1 << 20
MAX_PAYLOAD = 256 << 20

Message = dict[str, Any]


class _This(Factory):
    """Builds the one channel end a socket is adopted for."""

    noisy = False

    def __init__(self, control: Control) -> None:
        self.control = control

    def buildProtocol(self, addr: Any) -> Control:
        return self.control


@implementer(IFileDescriptorReceiver)
class Control(LineReceiver):
    """One end of the channel: ``send`` a message (with descriptors, a payload),
    ``on_message(message, fds)`` for each received, ``on_lost()`` once the other end is gone."""

    delimiter = b"\n"
    MAX_LENGTH = MAX_LINE

    def __init__(self, on_message: Callable[[Message, list[int]], None], on_lost: Callable[[], None]) -> None:
        self.on_message = on_message
        self.on_lost = on_lost
        self._fds: collections.deque[int] = collections.deque()  # received, not yet claimed by a message
        self._awaiting: tuple[Message, list[int], int] | None = None  # a message whose payload is arriving
        self._payload: list[bytes] = []

    def adopt(self, reactor: Any, fd: int) -> None:
        """Run this end on ``fd``, a connected Unix stream socket (the reactor takes its own copy)."""
        reactor.adoptStreamConnection(fd, socket.AF_UNIX, _This(self))

    def send(self, message: Message, fds: Sequence[int] = (), payload: bytes = b"") -> None:
        """Send ``message``; ``fds`` stay open here (the transport sends them with its next write)."""
        if self.transport is None:
            return
        for fd in fds:
            self.transport.sendFileDescriptor(fd)
        header = {**message, "fds": len(fds), **({"bytes": len(payload)} if payload else {})}
        self.transport.write(json.dumps(header, separators=(",", ":")).encode() + b"\n")
        if payload:
            self.transport.write(payload)

    def fileDescriptorReceived(self, descriptor: int) -> None:
        self._fds.append(descriptor)

    def lineReceived(self, line: bytes) -> None:
        try:
            message = json.loads(line)
            count = int(message.get("fds", 0))
        except (ValueError, AttributeError, TypeError):
            log.error("control channel: a line that is no message; dropped: {line!r}", line=line[:200])
            return
        if count > len(self._fds):
            log.error("control channel: a message claims {n} descriptors, {m} arrived; dropped", n=count,
                      m=len(self._fds))  # fmt: skip
            return
        fds = [self._fds.popleft() for _ in range(count)]
        size = message.get("bytes", 0)
        if not isinstance(size, int) or not 0 <= size <= MAX_PAYLOAD:
            log.error("control channel: a payload of {size!r} bytes; closing the channel", size=size)
            self.transport.loseConnection()
            return
        if size:
            self._awaiting = (message, fds, size)
            self.setRawMode()
            return
        self._deliver(message, fds)

    def rawDataReceived(self, data: bytes) -> None:
        """Bytes of the payload of the message received last; the line after it begins the next."""
        assert self._awaiting is not None
        message, fds, size = self._awaiting
        need = size - sum(map(len, self._payload))
        self._payload.append(data[:need])
        if len(data) < need:
            return
        message["payload"] = b"".join(self._payload)
        self._awaiting, self._payload = None, []
        self._deliver(message, fds)
        self.setLineMode(data[need:])

    def _deliver(self, message: Message, fds: list[int]) -> None:
        try:
            self.on_message(message, fds)
        except Exception:
            log.failure("control channel: handling {op} failed", op=message.get("op"))

    def lineLengthExceeded(self, line: bytes) -> None:
        log.error("control channel: a message over {n} bytes; closing the channel", n=MAX_LINE)
        self.transport.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:
        while self._fds:
            os.close(self._fds.popleft())
        self.on_lost()
