"""Everything written to one peer: a read's replies in one send, other connections' writes held to
the end of the read, and the bounds on what a peer that is not reading can cost.

``ReplyWriter`` owns the writing side of one connection; it knows the transport, not the
``Connection`` (``transport.py``) that composes it. Invariants:
- Replies made while a read is handled (``start_read`` .. ``end_read``) are collected and leave
  together in one send when it ends (``sockwrite.write_now``). They are flushed early once they
  pass ``REPLY_FLUSH_BYTES``, so a pipelined burst of large answers meets Twisted's write-buffer
  bound (and its pause of the connection) while it is being handled. A peer that stops reading
  therefore costs the server a bounded buffer, never memory that grows with what it sends.
- Writes to this peer made while another connection's read is handled (a relayed answer, a woken
  held pull's answer) wait for the outermost read to end (``WriteBatch``), then leave in one send.
- Answers that land later (held pulls waking) go through Twisted's buffer, and are written even to
  a paused peer, so those are bounded by ``ReplyBuffers``: past its per-connection or total bound,
  an answer with a body is replaced by SYSTEM_BUSY (a ``reply_buffer_full`` rejection), which the
  client retries once it reads again. Requests and bodiless answers always go.
- The server's own requests (``outbound.py``) leave through ``write_request``, in order with the
  replies, counted against the bounds but never refused.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

from codec.codes import ResponseCode
from codec.command import RemotingCommand

from .rejects import REPLY_BUFFER_FULL
from .sockwrite import writer

__all__ = ["REPLY_FLUSH_BYTES", "ReplyBuffers", "ReplyWriter", "WriteBatch"]

#: Replies of one read leave early once they pass this size (see the module doc).
REPLY_FLUSH_BYTES = 256 * 1024
_INT32 = struct.Struct(">i")
#: A header's usual size, what a reply counts against ``ReplyBuffers`` besides its body.
_HEADER_BYTES = 256


class WriteBatch:
    """Writes to other connections made while a read is handled (a relayed answer, a woken held
    pull's answer) wait until the outermost read ends, then leave in one send per connection:
    a read that carries ten requests for the same upstream broker forwards them in one send, not
    ten queued writes each costing the reactor a write-readiness round."""

    def __init__(self) -> None:
        self.depth = 0  # reads being handled (a read's handler may end in another's)
        self.dirty: list[ReplyWriter] = []

    def end(self) -> None:
        """A read ended: once the outermost has, every writer that held bytes sends them."""
        self.depth -= 1
        if self.depth == 0 and self.dirty:
            dirty, self.dirty = self.dirty, []
            for held in dirty:
                held.flush_pending()


class ReplyBuffers:
    """Bytes written to peers that are not reading (paused), per peer and in all, against a bound
    for each: an answer with a body that would pass either is refused."""

    def __init__(self, per_connection: int, total: int) -> None:
        self.per_connection = per_connection
        self.limit = total
        self.total = 0

    def admit(self, peer: ReplyWriter, size: int, *, required: bool) -> bool:
        """Count ``size`` more unread bytes of ``peer``, unless an optional write would pass a bound."""
        if not required and (peer.unread + size > self.per_connection or self.total + size > self.limit):
            return False
        peer.unread += size
        self.total += size
        return True

    def drained(self, peer: ReplyWriter) -> None:
        """``peer`` read everything (or is gone): its bytes no longer count."""
        self.total -= peer.unread
        peer.unread = 0


class ReplyWriter:
    """What is written to one peer, and its back-pressure state (see the module doc).

    ``open`` and ``paused`` are the connection's only record of whether it is up and whether its
    peer is reading: ``transport.Connection`` reads and sets them here."""

    __slots__ = ("transport", "buffers", "batch", "reject", "name", "open", "paused", "unread",
                 "replies", "reply_bytes", "pending", "_write_now")  # fmt: skip

    def __init__(self, buffers: ReplyBuffers, batch: WriteBatch | None = None,
                 reject: Callable[..., None] | None = None) -> None:  # fmt: skip
        self.transport: Any = None  # set by ``attach``
        self.buffers = buffers
        self.batch = batch
        self.reject = reject  # counts and logs a REPLY_BUFFER_FULL refusal (``rejects.Rejections``)
        self.name = "<unattached>"  # the peer, as log lines and errors name it
        self.open = False  # up, and not being closed: what is written now can still arrive
        self.paused = False  # the peer is not reading what we write
        self.unread = 0  # bytes written since the peer stopped reading (counted by ``buffers``)
        self.replies: list[bytes] | None = None  # replies made while a read is handled
        self.reply_bytes = 0  # the size of their bodies
        self.pending: list[bytes] = []  # writes waiting for ``batch`` to end
        self._write_now: Callable[[bytes], Any] = _closed

    def attach(self, transport: Any, name: str) -> None:
        """Write to ``transport`` from now on; ``name`` is the peer in log lines."""
        self.transport = transport
        self._write_now = writer(transport)
        self.name = name
        self.open = True

    def close(self) -> None:
        """The connection is gone: nothing more is written, and its unread bytes no longer count."""
        self.open = False
        self.buffers.drained(self)

    def pause(self) -> bool:
        """The peer stopped reading: count what is written from now on. False if it already had."""
        if self.paused:
            return False
        self.paused = True
        return True

    def resume(self) -> None:
        """The peer read everything written to it: none of it counts any more."""
        self.paused = False
        self.buffers.drained(self)

    def start_read(self) -> None:
        """A read is being handled: collect its replies, and hold other connections' writes."""
        self.replies = []
        self.reply_bytes = 0
        if self.batch is not None:
            self.batch.depth += 1

    def end_read(self) -> None:
        """The read is handled: its replies leave in one send, then the batch may end."""
        replies, self.replies = self.replies, None
        if replies and self.open:
            self._write_now(b"".join(replies))
        if self.batch is not None:
            self.batch.end()

    def write_command(self, command: RemotingCommand | None) -> None:
        """Send a command now, if the connection is still up (a late answer is dropped). Replies
        made while a read is handled are collected and leave together when it ends."""
        if command is None or not self.open:
            return
        if self.paused:
            command = self._within_buffers(command)
        header = command.encode_header()
        body = command.body
        replies = self.replies
        if replies is not None:
            replies.append(header)
            if body:  # only bodies count: headers are small, and one read holds few requests
                replies.append(body)
                self.reply_bytes += len(body)
                if self.reply_bytes > REPLY_FLUSH_BYTES:  # a burst of large answers meets the bound now
                    early = b"".join(replies)
                    replies.clear()
                    self.reply_bytes = 0
                    self._write_now(early)
        elif self.batch is not None and self.batch.depth:
            self._later(header)
            if body:
                self._later(body)
        elif body:
            self.transport.writeSequence((header, body))
        else:
            self.transport.write(header)

    def write_request(self, *parts: bytes) -> None:
        """Our own request's bytes (one or more ``parts`` of it), in order with the replies of the
        read being handled; counted against ``ReplyBuffers`` like any write to a peer that is not
        reading, never refused."""
        if self.paused:
            self.buffers.admit(self, sum(map(len, parts)), required=True)
        if self.replies is not None:
            self.replies.extend(parts)
        elif self.batch is not None and self.batch.depth:
            self._later(*parts)
        elif len(parts) == 1:
            self.transport.write(parts[0])
        else:
            self.transport.writeSequence(parts)

    def write_frame(self, payload: bytes) -> None:
        """A frame passed on as it came (``payload``: the bytes after its length prefix), if the
        connection is still up, as ``write_request`` writes."""
        if self.open:
            self.write_request(_INT32.pack(len(payload)), payload)

    def flush_pending(self) -> None:
        """Send what waited for the batch (``WriteBatch``), in one send."""
        pending, self.pending = self.pending, []
        if pending and self.open:
            self._write_now(b"".join(pending))

    def _later(self, *parts: bytes) -> None:
        """Hold ``parts`` until the batch of the read being handled ends."""
        if not self.pending:
            self.batch.dirty.append(self)  # type: ignore[union-attr]
        self.pending.extend(parts)

    def _within_buffers(self, command: RemotingCommand) -> RemotingCommand:
        """``command``, or SYSTEM_BUSY in place of an answer whose body the unread peer has no
        room left for (``ReplyBuffers``); requests and bodiless answers always go."""
        size = len(command.body) + _HEADER_BYTES  # close enough for a bound
        optional = command.is_response and bool(command.body)
        if self.buffers.admit(self, size, required=not optional):
            return command
        if self.reject is not None:
            self.reject(REPLY_BUFFER_FULL, "{conn} is not reading: {n} bytes of its replies wait; refusing a "
                        "{size}-byte answer", conn=self.name, n=self.unread, size=size)  # fmt: skip
        busy = dataclasses.replace(
            command, code=ResponseCode.SYSTEM_BUSY, ext_fields=None, body=b"",
            remark=f"{self.unread} bytes of answers to this connection are still unread "
                   "(maxBufferedReplyBytesPerConnection, maxBufferedReplyBytes); try again",
        )  # fmt: skip
        self.buffers.admit(self, _HEADER_BYTES, required=True)
        return busy


def _closed(data: bytes) -> None:
    """The write of a writer not yet attached to a transport: nothing is written."""
