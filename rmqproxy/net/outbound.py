"""The requests the server itself sends to a peer (NOTIFY_CONSUMER_IDS_CHANGED,
GET_CONSUMER_RUNNING_INFO, and every request the proxy relays upstream), and their answers.

Numbering them and matching their answers is ``codec.peer.RemotingPeer``'s (the same peer that
frames the connection's bytes); their bytes leave through the connection's ``ReplyWriter``, in
order with its replies. This module adds the clock and the Deferreds. Invariants:
- A oneway request (flag 0x2) is numbered but never awaited.
- ``request``'s Deferred fires with the answer, or fails with ``RequestTimeout`` exactly
  ``timeout_s`` later (a timer of its own).
- ``relay`` passes a frame on as bytes under its sender's opaque, awaited as ``call``'s are.
- ``call`` has no Deferred and no timer: its deadline is checked by a sweep once every
  ``SWEEP_S``, as a Java client checks its own (the proxy relays thousands of these a second).
- A request made on a closed connection fails at once; when the connection is lost, every one
  still outstanding fails with ``RequestTimeout``. Nothing waits forever.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from codec.codes import FLAG_ONEWAY, code_name
from codec.command import RemotingCommand
from codec.peer import ANSWER, Incoming, RemotingPeer

from .replies import ReplyWriter

__all__ = ["SWEEP_S", "OutboundRequests", "RequestTimeout"]

log = Logger()

#: How often the deadlines of ``OutboundRequests.call`` requests are checked.
SWEEP_S = 1.0


class RequestTimeout(Exception):
    """A peer did not answer our request in time."""


class OutboundRequests:
    """The server-started requests of one connection (see the module doc)."""

    __slots__ = ("peer", "clock", "writer", "_sweeper")

    def __init__(self, peer: RemotingPeer, clock: IReactorTime, writer: ReplyWriter) -> None:
        self.peer = peer  # numbers our requests and matches their answers; shared with the framing
        self.clock = clock
        self.writer = writer  # whether the connection is up, and the write of our requests' bytes
        self._sweeper: Any = None  # the timer of the next deadline sweep of ``call`` requests

    def send_oneway(self, command: RemotingCommand) -> None:
        """A server-initiated oneway request (flag 0x2)."""
        if self.writer.open:
            oneway = dataclasses.replace(command, flag=command.flag | FLAG_ONEWAY)
            self.writer.write_request(self.peer.request(oneway)[1])

    def request(self, command: RemotingCommand, timeout_s: float) -> defer.Deferred:
        """A server-initiated request; fires with the response, or fails with RequestTimeout
        exactly ``timeout_s`` later (a timer of its own)."""
        d: defer.Deferred = defer.Deferred()
        if not self.writer.open:
            d.errback(RequestTimeout(f"{self.writer.name} is closed"))
            return d
        timer = self.clock.callLater(timeout_s, self._expire)
        self._send(command, timeout_s, _settle, (d, timer))
        return d

    def call(self, command: RemotingCommand, timeout_s: float, callback: Callable[..., Any], *args: Any) -> None:
        """A request whose answer, or a RequestTimeout, is passed to ``callback(result, *args)``.
        Without a Deferred or a timer each: its deadline is checked by a sweep once a second, as
        a Java client checks its own (the proxy relays thousands of these a second)."""
        if not self.writer.open:
            callback(RequestTimeout(f"{self.writer.name} is closed"), *args)
            return
        self._send(command, timeout_s, callback, args)
        if self._sweeper is None:
            self._sweeper = self.clock.callLater(SWEEP_S, self._sweep)

    def relay(self, payload: bytes, opaque: int, code: int, timeout_s: float, callback: Callable[..., Any],
              *args: Any) -> bool:  # fmt: skip
        """Pass a frame on as it came (``payload``: after its length prefix), awaited under its
        sender's ``opaque`` as ``call`` awaits ours: the caller takes its answer off the peer
        (``awaited``/``forget``), or ``callback`` gets a RequestTimeout. False, and nothing sent,
        if the connection is closed or that opaque is awaited already (one of ours)."""
        if not self.writer.open or not self.peer.track(
            opaque, code, deadline=self.clock.seconds() + timeout_s, context=(callback, args)
        ):  # fmt: skip
            return False
        self.writer.write_frame(payload)
        if self._sweeper is None:
            self._sweeper = self.clock.callLater(SWEEP_S, self._sweep)
        return True

    def answered(self, incoming: Incoming) -> None:
        """A response the peer matched (``RemotingPeer.match``): to its request's callback."""
        if incoming.kind is not ANSWER:
            log.debug("unmatched response {opaque} ({code}) from {conn}", opaque=incoming.command.opaque,
                      code=code_name(incoming.command.code, response=True), conn=self.writer.name)  # fmt: skip
            return
        callback, args = incoming.outstanding.context  # type: ignore[union-attr]
        callback(incoming.command, *args)

    def close(self) -> None:
        """The connection is gone: no more sweeps, and every outstanding request fails."""
        if self._sweeper is not None and self._sweeper.active():
            self._sweeper.cancel()
        self._sweeper = None
        for outstanding in self.peer.close():
            callback, args = outstanding.context
            callback(RequestTimeout(f"{self.writer.name} closed before answering"), *args)

    def _send(self, command: RemotingCommand, timeout_s: float, callback: Callable[..., Any], args: tuple) -> None:
        """Number ``command``, remember who gets its answer, and write it."""
        _, data = self.peer.request(command, deadline=self.clock.seconds() + timeout_s, context=(callback, args))
        self.writer.write_request(data)

    def _expire(self) -> None:
        """Fail the requests whose deadline has passed."""
        for outstanding in self.peer.expire(self.clock.seconds()):
            callback, args = outstanding.context
            callback(RequestTimeout(f"{self.writer.name} did not answer request {outstanding.opaque}"), *args)

    def _sweep(self) -> None:
        """Expire due ``call`` requests, and come back in ``SWEEP_S`` while any are outstanding."""
        self._sweeper = None
        self._expire()
        if self.writer.open and self.peer.has_outstanding():
            self._sweeper = self.clock.callLater(SWEEP_S, self._sweep)


def _settle(result: Any, d: defer.Deferred, timer: Any) -> None:
    """A ``request``'s answer or timeout, to its Deferred."""
    if timer.active():
        timer.cancel()
    if isinstance(result, Exception):
        d.errback(result)
    else:
        d.callback(result)
