"""The Twisted ``Protocol`` for one client connection: bytes in, commands to dispatch, replies out.

A thin adapter over the sans-IO codec. Invariants:
- The frame cap is checked from the length prefix (``FrameDecoder``); an oversized, impossible or
  undecodable frame closes the connection with a log line, as Java's ``NettyDecoder`` does — the
  byte stream can no longer be trusted. Nothing a peer sends raises out of ``dataReceived``.
- Requests go to ``handler(command, connection)``; its result (a command, a Deferred of one, or
  None) is written back unless the request was oneway or the connection has gone. A oneway
  request's answer is dropped, but one other than SUCCESS, now or later, is a ``oneway_refused``
  rejection (counted and logged), since its client never learns of it. A handler that counts
  its refusal under a reason of its own answers a oneway request None, so it is counted once.
- Framing, decoding, the numbering of the server's own requests (NOTIFY_CONSUMER_IDS_CHANGED,
  GET_CONSUMER_RUNNING_INFO) and the matching of their answers are ``codec.peer.RemotingPeer``'s;
  this class adds the socket, the clock (each request's timeout is a ``callLater``) and Deferreds.
- Back-pressure: the connection is its transport's streaming producer. Once more of its replies
  wait to be sent than the kernel's socket buffer and Twisted's ``bufferSize`` (64 KiB) hold (the
  peer is not reading), Twisted pauses it and it stops reading the socket; frames already read
  wait unhandled until the replies have drained.
  The replies of one read are flushed early once they pass ``REPLY_FLUSH_BYTES``, so a pipelined
  burst of large answers meets that bound while it is being handled. A peer that stops reading
  therefore costs the server a bounded buffer, never memory that grows with what it sends.
- Answers that land later (held pulls waking) are written even to a paused connection, so those
  are bounded by ``ReplyBuffers``: past its per-connection or total bound, an answer with a body
  is replaced by SYSTEM_BUSY, which the client retries once it reads again.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from codec.codes import FLAG_ONEWAY, ResponseCode, code_name
from codec.command import RemotingCommand
from codec.errors import CodecError, MessageError
from codec.message import HostPort
from codec.peer import ANSWER, Incoming, RemotingPeer

from ..core.alarm import Deadlines
from .rejects import BAD_FRAME, ONEWAY_REFUSED, REPLY_BUFFER_FULL, TOO_MANY_IN_FLIGHT
from .sockwrite import writer

log = Logger()

Handler = Callable[[RemotingCommand, "Connection"], Any]

_ids = itertools.count(1)

#: How often the deadlines of ``Connection.call`` requests are checked.
SWEEP_S = 1.0
#: Replies of one read leave early once they pass this size (see the module doc).
REPLY_FLUSH_BYTES = 256 * 1024
_SUCCESS = int(ResponseCode.SUCCESS)


class RequestTimeout(Exception):
    """A peer did not answer our request in time."""


class WriteBatch:
    """Writes to other connections made while a read is handled (a relayed answer, a woken held
    pull's answer) wait until the outermost read ends, then leave in one send per connection:
    a read that carries ten requests for the same upstream broker forwards them in one send, not
    ten queued writes each costing the reactor a write-readiness round."""

    def __init__(self) -> None:
        self.depth = 0  # reads being handled (a read's handler may end in another's)
        self.dirty: list[Connection] = []

    def end(self) -> None:
        self.depth -= 1
        if self.depth == 0 and self.dirty:
            dirty, self.dirty = self.dirty, []
            for conn in dirty:
                conn.flush_pending()


class ReplyBuffers:
    """Bytes written to connections whose peers are not reading (paused), per connection and in
    all, against a bound for each: an answer with a body that would pass either is refused."""

    def __init__(self, per_connection: int, total: int) -> None:
        self.per_connection = per_connection
        self.limit = total
        self.total = 0

    def admit(self, conn: Connection, size: int, *, required: bool) -> bool:
        """Count ``size`` more unread bytes of ``conn``, unless an optional write would pass a bound."""
        if not required and (conn.unread + size > self.per_connection or self.total + size > self.limit):
            return False
        conn.unread += size
        self.total += size
        return True

    def drained(self, conn: Connection) -> None:
        """``conn``'s peer read everything (or is gone): its bytes no longer count."""
        self.total -= conn.unread
        conn.unread = 0


class Connection(Protocol):
    """One peer's connection. What its client said of itself is the ``ClientRegistry``'s."""

    def __init__(
        self,
        handler: Handler,
        clock: IReactorTime,
        *,
        max_frame_bytes: int,
        on_close: Callable[[Connection], None] | None = None,
        on_reject: Callable[..., None] | None = None,
        max_in_flight: int = 20_000,
        buffers: ReplyBuffers | None = None,
        batch: WriteBatch | None = None,
        deadlines: Deadlines | None = None,
    ) -> None:
        self.id = next(_ids)
        self.batch = batch
        self.deadlines = deadlines  # polled between a read's requests: a due deadline goes first
        self._pending: list[bytes] = []  # writes waiting for ``batch`` to end
        self._sweeper: Any = None  # the timer of the next deadline sweep of ``call`` requests
        self.handler = handler
        self.clock = clock
        self.peer = RemotingPeer(max_frame_bytes)
        self.on_close = on_close
        self.on_reject = on_reject
        self.max_in_flight = max_in_flight
        self.buffers = buffers if buffers is not None else ReplyBuffers(16 << 20, 512 << 20)
        self.unread = 0  # bytes written since the peer stopped reading (counted by ``buffers``)
        self.in_flight = 0  # requests whose answer is still to come (held pulls, SYNC_FLUSH sends)
        self.remote = "unknown"
        self.ip = ""  # the peer's address, as ACL whitelists name it
        self.born_host = HostPort("0.0.0.0", 0)  # the peer as a message's BORNHOST
        self.connected = False
        self._replies: list[bytes] | None = None  # replies made while a read is handled
        self._reply_bytes = 0  # their size
        self.paused = False  # the peer is not reading its replies: neither are we reading it
        self._waiting: list[bytes] = []  # frames read but not handled while paused

    def __repr__(self) -> str:
        return f"<Connection {self.id} {self.remote}>"

    def connectionMade(self) -> None:
        # Small answers must leave at once: with Nagle on, a reply waits for the ACK of the last
        # one (up to the peer's delayed-ACK timeout). Netty, on both RocketMQ sides, sets it too.
        if hasattr(self.transport, "setTcpNoDelay"):
            self.transport.setTcpNoDelay(True)
        self._write_now = writer(self.transport)
        peer = self.transport.getPeer()
        self.ip = getattr(peer, "host", "")
        self.remote = f"{self.ip or '?'}:{getattr(peer, 'port', 0)}"
        try:
            self.born_host = HostPort.parse(self.remote)
        except MessageError:
            pass  # not an IP peer (a test double): the default stands
        self.connected = True
        if hasattr(self.transport, "registerProducer"):
            self.transport.registerProducer(self, True)  # Twisted pauses us when replies pile up

    # --- IPushProducer: the transport's write buffer drives our reading -------------------

    def pauseProducing(self) -> None:
        """Replies are piling up unread: stop reading the peer."""
        if not self.paused:
            self.paused = True
            log.debug("pausing {conn}: its replies are not being read", conn=self)
            self.transport.pauseProducing()

    def resumeProducing(self) -> None:
        """The replies have drained: handle the frames that waited, then read again."""
        if not self.paused or not self.connected:
            return
        self.paused = False
        self.buffers.drained(self)
        waiting, self._waiting = self._waiting, []
        if waiting:
            self._handle(waiting)
        if not self.paused:
            self.transport.resumeProducing()

    def stopProducing(self) -> None:
        self._waiting = []

    def dataReceived(self, data: bytes) -> None:
        try:
            payloads = self.peer.feed(data)
        except CodecError as exc:
            self._protocol_error(exc)
            return
        if self.paused:  # the transport may still deliver what it had read
            self._waiting += payloads
            return
        self._handle(payloads)

    def _handle(self, payloads: list[bytes]) -> None:
        """Dispatch frames in order; stop at a pause, keeping the rest for ``resumeProducing``."""
        self._replies = replies = []
        self._reply_bytes = 0
        batch = self.batch
        if batch is not None:
            batch.depth += 1
        deadlines = self.deadlines
        try:
            i = 0
            for payload in payloads:
                if not self.connected:
                    return
                if self.paused:
                    self._waiting = payloads[i:] + self._waiting
                    return
                i += 1
                try:
                    command = RemotingCommand.decode(payload)
                except CodecError as exc:
                    self._protocol_error(exc)
                    return
                if command.is_response:
                    self._answered(self.peer.match(command))
                else:  # the hot path: a request, no matching to do
                    self._request(command)
                if deadlines is not None and deadlines.earliest <= deadlines.clock():
                    deadlines.poll()
        finally:
            self._replies = None
            if replies and self.connected:
                self._flush_replies(replies)
            if batch is not None:
                batch.end()

    def _protocol_error(self, exc: CodecError) -> None:
        if self.on_reject is not None:
            self.on_reject(BAD_FRAME, "closing {conn}: {error}", conn=self, error=exc)
        else:
            log.warn("closing {conn}: {error}", conn=self, error=exc)
        self.connected = False
        self.transport.abortConnection()

    def _request(self, command: RemotingCommand) -> None:
        if self.in_flight >= self.max_in_flight:
            if self.on_reject is not None:
                self.on_reject(TOO_MANY_IN_FLIGHT, "{conn} has {n} requests in flight: refusing {code}",
                               conn=self, n=self.in_flight, code=command.code)  # fmt: skip
            if not command.is_oneway:
                self.write_command(command.response(
                    ResponseCode.SYSTEM_BUSY, f"{self.in_flight} requests of this connection are still in flight "
                       "(maxInFlightRequestsPerConnection); try again later",
                ))  # fmt: skip
            return
        try:
            result = self.handler(command, self)
        except Exception:
            log.failure("handler crashed on {code} from {conn}", code=command.code, conn=self)
            result = command.response(1, f"internal error handling request code {command.code}")
        if command.is_oneway:  # its answer is not sent; one other than SUCCESS is counted instead
            if result.__class__ is RemotingCommand:
                if result.code != _SUCCESS:
                    self._oneway_refused(command, result)
            elif isinstance(result, defer.Deferred):
                result.addCallbacks(self._oneway_landed, self._oneway_failed,
                                    callbackArgs=(command,), errbackArgs=(command,))  # fmt: skip
            return
        if result.__class__ is RemotingCommand:  # the usual answer; Deferred's isinstance goes through ABCMeta
            self.write_command(result)
        elif isinstance(result, defer.Deferred):
            self.in_flight += 1
            result.addBoth(self._landed)
            result.addCallback(self.write_command)
            result.addErrback(self._deferred_failed, command)
        elif result is not None:
            self.write_command(result)

    def _landed(self, result: Any) -> Any:
        self.in_flight -= 1
        return result

    def _deferred_failed(self, failure: Failure, command: RemotingCommand) -> None:
        log.failure("deferred handler failed on {code} from {conn}", failure, code=command.code, conn=self)
        self.write_command(command.response(1, f"internal error handling request code {command.code}"))

    def _oneway_landed(self, answer: Any, command: RemotingCommand) -> None:
        if isinstance(answer, RemotingCommand) and answer.code != _SUCCESS:
            self._oneway_refused(command, answer)

    def _oneway_failed(self, failure: Failure, command: RemotingCommand) -> None:
        log.failure("deferred handler failed on one-way {code} from {conn}", failure, code=command.code, conn=self)
        self._oneway_refused(command, command.response(1, f"internal error handling request code {command.code}"))

    def _oneway_refused(self, command: RemotingCommand, answer: RemotingCommand) -> None:
        """A one-way request was not honoured: its client will never read why, so the log says."""
        fmt = "one-way {code} from {conn} refused: {answer} {remark}"
        request_code, answer_code = code_name(command.code, response=False), code_name(answer.code, response=True)
        if self.on_reject is not None:
            self.on_reject(ONEWAY_REFUSED, fmt, code=request_code, conn=self, answer=answer_code, remark=answer.remark)
        else:
            log.info(fmt, code=request_code, conn=self, answer=answer_code, remark=answer.remark)

    def write_command(self, command: RemotingCommand | None) -> None:
        """Send a command now, if the connection is still up (a late answer is dropped). Replies
        made while a read is handled are collected and leave together when it ends."""
        if command is None or not self.connected:
            return
        if self.paused:
            command = self._within_buffers(command)
        header = command.encode_header()
        body = command.body
        replies = self._replies
        if replies is not None:
            replies.append(header)
            if body:  # only bodies count: headers are small, and one read holds few requests
                replies.append(body)
                self._reply_bytes += len(body)
                if self._reply_bytes > REPLY_FLUSH_BYTES:  # a burst of large answers meets the bound now
                    early = replies[:]
                    replies.clear()
                    self._reply_bytes = 0
                    self._flush_replies(early)
        elif self.batch is not None and self.batch.depth:
            self._later(header)
            if body:
                self._later(body)
        elif body:
            self.transport.writeSequence((header, body))
        else:
            self.transport.write(header)

    def _later(self, data: bytes) -> None:
        """Hold ``data`` until the batch of the read being handled ends."""
        if not self._pending:
            self.batch.dirty.append(self)  # type: ignore[union-attr]
        self._pending.append(data)

    def flush_pending(self) -> None:
        """Send what waited for the batch (``WriteBatch``), in one send."""
        pending, self._pending = self._pending, []
        if pending and self.connected:
            self._write_now(b"".join(pending))

    def _within_buffers(self, command: RemotingCommand) -> RemotingCommand:
        """``command``, or SYSTEM_BUSY in place of an answer whose body the unread peer has no
        room left for (``ReplyBuffers``); requests and bodiless answers always go."""
        size = len(command.body) + 256  # a header's usual size: close enough for a bound
        optional = command.is_response and bool(command.body)
        if self.buffers.admit(self, size, required=not optional):
            return command
        if self.on_reject is not None:
            self.on_reject(REPLY_BUFFER_FULL, "{conn} is not reading: {n} bytes of its replies wait; refusing a "
                           "{size}-byte answer", conn=self, n=self.unread, size=size)  # fmt: skip
        busy = _with(command, code=ResponseCode.SYSTEM_BUSY, ext_fields=None, body=b"",
                     remark=f"{self.unread} bytes of answers to this connection are still unread "
                            "(maxBufferedReplyBytesPerConnection, maxBufferedReplyBytes); try again")  # fmt: skip
        self.buffers.admit(self, 256, required=True)
        return busy

    def _flush_replies(self, replies: list[bytes]) -> None:
        """The replies of one read in one send (``rmqproxy/net/sockwrite.py``)."""
        self._write_now(b"".join(replies))

    def send_oneway(self, command: RemotingCommand) -> None:
        """A server-initiated oneway request (flag 0x2)."""
        if self.connected:
            self._write_request(self.peer.request(_with(command, flag=command.flag | FLAG_ONEWAY))[1])

    def request(self, command: RemotingCommand, timeout_s: float) -> defer.Deferred:
        """A server-initiated request; fires with the response, or fails with RequestTimeout
        exactly ``timeout_s`` later (a timer of its own)."""
        d: defer.Deferred = defer.Deferred()
        if not self.connected:
            d.errback(RequestTimeout(f"{self} is closed"))
            return d
        timer = self.clock.callLater(timeout_s, self._expire)
        self._send_request(command, timeout_s, _settle, (d, timer))
        return d

    def call(self, command: RemotingCommand, timeout_s: float, callback: Callable[..., Any], *args: Any) -> None:
        """A request whose answer, or a RequestTimeout, is passed to ``callback(result, *args)``.
        Without a Deferred or a timer each: its deadline is checked by a sweep once a second, as
        a Java client checks its own (the proxy relays thousands of these a second)."""
        if not self.connected:
            callback(RequestTimeout(f"{self} is closed"), *args)
            return
        self._send_request(command, timeout_s, callback, args)
        if self._sweeper is None:
            self._sweeper = self.clock.callLater(SWEEP_S, self._sweep)

    def _send_request(self, command: RemotingCommand, timeout_s: float, callback: Callable[..., Any], args: tuple) -> None:
        _, data = self.peer.request(command, deadline=self.clock.seconds() + timeout_s, context=(callback, args))
        self._write_request(data)

    def _write_request(self, data: bytes) -> None:
        """Our own request's bytes, in order with the replies of the read being handled; counted
        against ``ReplyBuffers`` like any write to a peer that is not reading, never refused."""
        if self.paused:
            self.buffers.admit(self, len(data), required=True)
        if self._replies is not None:
            self._replies.append(data)
        elif self.batch is not None and self.batch.depth:
            self._later(data)
        else:
            self.transport.write(data)

    def _expire(self) -> None:
        for outstanding in self.peer.expire(self.clock.seconds()):
            callback, args = outstanding.context
            callback(RequestTimeout(f"{self} did not answer request {outstanding.opaque}"), *args)

    def _sweep(self) -> None:
        self._sweeper = None
        self._expire()
        if self.connected and self.peer.has_outstanding():
            self._sweeper = self.clock.callLater(SWEEP_S, self._sweep)

    def _answered(self, incoming: Incoming) -> None:
        if incoming.kind is not ANSWER:
            log.debug("unmatched response {opaque} ({code}) from {conn}", opaque=incoming.command.opaque,
                      code=code_name(incoming.command.code, response=True), conn=self)  # fmt: skip
            return
        callback, args = incoming.outstanding.context
        callback(incoming.command, *args)

    def connectionLost(self, reason: Failure = None) -> None:
        self.connected = False
        self.buffers.drained(self)
        if self._sweeper is not None and self._sweeper.active():
            self._sweeper.cancel()
        self._sweeper = None
        for outstanding in self.peer.close():
            callback, args = outstanding.context
            callback(RequestTimeout(f"{self} closed before answering"), *args)
        if self.on_close is not None:
            self.on_close(self)

    def close(self) -> None:
        if self.connected:
            self.connected = False
            self.transport.loseConnection()


def _settle(result: Any, d: defer.Deferred, timer: Any) -> None:
    """A ``request``'s answer or timeout, to its Deferred."""
    if timer.active():
        timer.cancel()
    if isinstance(result, Exception):
        d.errback(result)
    else:
        d.callback(result)


def _with(command: RemotingCommand, **changes: Any) -> RemotingCommand:
    return dataclasses.replace(command, **changes)
