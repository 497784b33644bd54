"""The Twisted ``Protocol`` for one client connection: bytes in, commands to dispatch, replies out.

A thin adapter over the sans-IO codec. ``Connection`` keeps the framing and the dispatch; what it
writes to its peer is its ``replies.ReplyWriter``'s (the reply sends, their back-pressure and
bounds), and the requests the server sends its peer are its ``outbound.OutboundRequests``'.
Invariants:
- The frame cap is checked from the length prefix (``FrameDecoder``); an oversized, impossible or
  undecodable frame closes the connection with a log line, as Java's ``NettyDecoder`` does — the
  byte stream can no longer be trusted. Nothing a peer sends raises out of ``dataReceived``.
- Requests go to ``handler(command, connection)``; its result (a command, a Deferred of one, or
  None) is written back unless the request was oneway or the connection has gone. A oneway
  request's answer is dropped, but one other than SUCCESS, now or later, is a ``oneway_refused``
  rejection (counted and logged), since its client never learns of it. A handler that counts
  its refusal under a reason of its own answers a oneway request None, so it is counted once.
- Past ``max_in_flight`` requests whose answer is still to come, a request is answered
  SYSTEM_BUSY (a ``too_many_in_flight`` rejection) without reaching the handler.
- A ``shortcut`` (the proxy's relay) may take a frame as bytes before it is decoded; what it
  does not take is decoded and dispatched as above.
- Framing and decoding are ``codec.peer.RemotingPeer``'s; the same peer numbers the server's own
  requests and matches their answers (``outbound.py``), so a read's responses go there.
- What its peer has sent of a frame it has not finished is counted, after each read, by the
  ``unfinished.UnfinishedFrames`` every connection of the server shares: past their total bound,
  or once it waits too long for the frame's next byte, the connection is closed (``abort``).
- A relay pairs two connections: ``on_pause`` tells it when this one's peer stops (or starts
  again) reading, and ``hold_back`` stops reading the other one meanwhile.
- Back-pressure: the connection is its transport's streaming producer. Once more of its replies
  wait to be sent than the kernel's socket buffer and Twisted's ``bufferSize`` (64 KiB) hold (the
  peer is not reading), Twisted pauses it and it stops reading the socket; frames already read
  wait unhandled until the replies have drained. What it still writes meanwhile is bounded by
  the writer (``replies.py``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from codec.codes import ResponseCode, code_name
from codec.command import RemotingCommand
from codec.errors import CodecError, MessageError
from codec.message import HostPort
from codec.peer import RemotingPeer

from ..core.alarm import Deadlines
from ..core.config import Config
from .outbound import OutboundRequests
from .rejects import BAD_FRAME, ONEWAY_REFUSED, TOO_MANY_IN_FLIGHT
from .replies import ReplyBuffers, ReplyWriter, WriteBatch
from .unfinished import UnfinishedFrames

log = Logger()

#: The unfinished-frame bounds of a connection built without a server's shared ones (tests).
_DEFAULTS = Config()

Handler = Callable[[RemotingCommand, "Connection"], Any]
#: Given a frame's payload before it is decoded: True if it took the frame (a relay passing it on as
#: bytes), False to have it decoded and dispatched as usual; ``CodecError`` closes the connection.
Shortcut = Callable[[bytes], bool]

_ids = itertools.count(1)

_SUCCESS = int(ResponseCode.SUCCESS)


class Connection(Protocol):
    """One peer's connection. What its client said of itself is the ``ClientRegistry``'s.

    Its writes and its own requests are its parts' methods, bound here so that a reply costs no
    extra call: ``write_command`` (``ReplyWriter``), ``send_oneway``, ``request`` and ``call``
    (``OutboundRequests``)."""

    write_command: Callable[[RemotingCommand | None], None]
    send_oneway: Callable[[RemotingCommand], None]
    request: Callable[[RemotingCommand, float], defer.Deferred]
    call: Callable[..., None]

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
        frames: UnfinishedFrames | None = None,
        first_opaque: int = 1,
    ) -> None:
        self.id = next(_ids)
        self.deadlines = deadlines  # polled between a read's requests: a due deadline goes first
        self.handler = handler
        self.clock = clock
        self.peer = RemotingPeer(max_frame_bytes, first_opaque)
        self.shortcut: Shortcut | None = None  # sees each frame before it is decoded; True: it took it
        self._decoder = self.peer.decoder  # read after every read: what it holds of an unfinished frame
        self.frames = frames if frames is not None else UnfinishedFrames(
            clock, _DEFAULTS.max_unfinished_frame_bytes, _DEFAULTS.frame_stall_timeout_ms / 1000)  # fmt: skip
        self.unfinished = 0  # bytes of a frame begun and not finished (counted by ``frames``)
        self.progressed = 0.0  # when that frame last got a byte (``frames``' stall check)
        self.on_close = on_close
        self.on_reject = on_reject
        self.max_in_flight = max_in_flight
        buffers = buffers if buffers is not None else ReplyBuffers(16 << 20, 512 << 20)
        self.writer = ReplyWriter(buffers, batch, on_reject)  # what is written to the peer, and its bounds
        self.outbound = OutboundRequests(self.peer, clock, self.writer)
        self.write_command = self.writer.write_command
        self.send_oneway = self.outbound.send_oneway
        self.request = self.outbound.request
        self.call = self.outbound.call
        self.in_flight = 0  # requests whose answer is still to come (held pulls, SYNC_FLUSH sends)
        self.remote = "unknown"
        self.ip = ""  # the peer's address, as ACL whitelists name it
        self.born_host = HostPort("0.0.0.0", 0)  # the peer as a message's BORNHOST
        self._waiting: list[bytes] = []  # frames read but not handled while paused
        self.held_back = False  # not read for another connection's sake (``hold_back``)
        self.on_pause: Callable[[bool], None] | None = None  # told when our peer stops or starts reading again

    def __repr__(self) -> str:
        return f"<Connection {self.id} {self.remote}>"

    @property
    def connected(self) -> bool:
        """The connection is up and not being closed (the writer's ``open``)."""
        return self.writer.open

    @connected.setter
    def connected(self, value: bool) -> None:
        self.writer.open = value  # ``Protocol.makeConnection`` sets it

    @property
    def paused(self) -> bool:
        """The peer is not reading its replies: neither are we reading it."""
        return self.writer.paused

    @property
    def unread(self) -> int:
        """Bytes written since the peer stopped reading (counted by ``buffers``)."""
        return self.writer.unread

    @property
    def buffers(self) -> ReplyBuffers:
        """The reply-buffer bounds this connection counts against."""
        return self.writer.buffers

    @property
    def batch(self) -> WriteBatch | None:
        """The write batch this connection's reads open and its late writes wait for."""
        return self.writer.batch

    def connectionMade(self) -> None:
        # Small answers must leave at once: with Nagle on, a reply waits for the ACK of the last
        # one (up to the peer's delayed-ACK timeout). Netty, on both RocketMQ sides, sets it too.
        if hasattr(self.transport, "setTcpNoDelay"):
            self.transport.setTcpNoDelay(True)
        peer = self.transport.getPeer()
        self.ip = getattr(peer, "host", "")
        self.remote = f"{self.ip or '?'}:{getattr(peer, 'port', 0)}"
        try:
            self.born_host = HostPort.parse(self.remote)
        except MessageError:
            pass  # not an IP peer (a test double): the default stands
        self.writer.attach(self.transport, repr(self))
        if hasattr(self.transport, "registerProducer"):
            self.transport.registerProducer(self, True)  # Twisted pauses us when replies pile up

    # --- IPushProducer: the transport's write buffer drives our reading -------------------

    def pauseProducing(self) -> None:
        """Replies are piling up unread: stop reading the peer."""
        if self.writer.pause():
            log.debug("pausing {conn}: its replies are not being read", conn=self)
            self.transport.pauseProducing()
            if self.on_pause is not None:
                self.on_pause(True)

    def hold_back(self, on: bool) -> None:
        """Stop (True) or start again reading this peer for another connection's sake: a relay
        whose other side is not reading what it forwards, so what it reads here is bounded."""
        self.held_back = on
        if not self.writer.open:
            return
        if on:
            self.transport.pauseProducing()
        elif not self.writer.paused:
            self.transport.resumeProducing()

    def resumeProducing(self) -> None:
        """The replies have drained: handle the frames that waited, then read again."""
        writer = self.writer
        if not writer.paused or not writer.open:
            return
        writer.resume()
        if self.unfinished:
            self.frames.restart(self)
        waiting, self._waiting = self._waiting, []
        if waiting:
            self._handle(waiting)
        if not writer.paused:
            if not self.held_back:
                self.transport.resumeProducing()
            if self.on_pause is not None:
                self.on_pause(False)

    def stopProducing(self) -> None:
        self._waiting = []

    def dataReceived(self, data: bytes) -> None:
        try:
            payloads = self.peer.feed(data)
        except CodecError as exc:
            self._protocol_error(exc)
            return
        if self._decoder.buffered_bytes or self.unfinished:  # a frame unfinished, or one just finished
            self.frames.held(self, self._decoder.buffered_bytes)
        if self.writer.paused:  # the transport may still deliver what it had read
            self._waiting += payloads
            return
        self._handle(payloads)

    def _handle(self, payloads: list[bytes]) -> None:
        """Dispatch frames in order; stop at a pause, keeping the rest for ``resumeProducing``."""
        writer = self.writer
        writer.start_read()
        deadlines = self.deadlines
        shortcut = self.shortcut
        try:
            i = 0
            for payload in payloads:
                if not writer.open:
                    return
                if writer.paused:
                    self._waiting = payloads[i:] + self._waiting
                    return
                i += 1
                try:
                    if shortcut is not None and shortcut(payload):
                        command = None
                    else:
                        command = RemotingCommand.decode(payload)
                except CodecError as exc:
                    self._protocol_error(exc)
                    return
                if command is None:
                    pass
                elif command.is_response:
                    self.outbound.answered(self.peer.match(command))
                else:  # the hot path: a request, no matching to do
                    self._request(command)
                if deadlines is not None and deadlines.earliest <= deadlines.clock():
                    deadlines.poll()
        finally:
            writer.end_read()

    def _protocol_error(self, exc: CodecError) -> None:
        self.abort(BAD_FRAME, "closing {conn}: {error}", error=exc)

    def abort(self, reason: str, fmt: str, **fields: Any) -> None:
        """Close at once, dropping what is unread and unsent: a ``reason`` rejection, counted and
        logged (``fmt`` names the connection as ``{conn}``)."""
        if self.on_reject is not None:
            self.on_reject(reason, fmt, conn=self, **fields)
        else:
            log.warn(fmt, conn=self, reason=reason, **fields)
        self.writer.open = False
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

    def connectionLost(self, reason: Failure = None) -> None:
        if self.writer.paused and self.on_pause is not None:
            self.on_pause(False)  # gone: nothing waits for this peer to read any more
        self.frames.release(self)
        self.writer.close()
        self.outbound.close()
        if self.on_close is not None:
            self.on_close(self)

    def close(self) -> None:
        """Close the connection: what is written after this is dropped."""
        if self.writer.open:
            self.writer.open = False
            self.transport.loseConnection()
