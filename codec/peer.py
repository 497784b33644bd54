"""One end of a remoting connection, sans IO: bytes in, commands out; commands in, bytes out.

Both ends of the protocol send requests: a client sends most, and the server sends its own
(NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO) on the same connection. So each end is
the same ``RemotingPeer``: it frames and decodes what arrives, gives each request of ours an
``opaque`` and remembers it until its answer comes, matches answers to those requests, and names
the ones whose deadline passed. It owns no socket and no clock: the caller moves the bytes and
says what time it is (``expire(now)``), so the server's Twisted connection, the test harness and
the benchmark clients all use it unchanged.

- ``feed(data)`` returns whole frames (``CodecError`` on an undecodable stream: close it);
  ``read(frame)`` decodes one into an ``Incoming``: a request of the other end, an answer to one
  of ours (with what ``request`` was given as ``context``), or a stray answer that matches
  nothing (a late one, after its deadline). ``receive(data)`` does both for a whole read.
- ``request(command, deadline=..., context=...)`` numbers the command and returns its opaque
  and bytes; a one-way command (flag 0x2) is numbered but never awaited.
- ``track(opaque, ...)`` awaits a request someone else numbered (a relay that passes frames on as
  bytes, under their sender's opaque); our own numbering skips every opaque still awaited.
- ``expire(now)`` and ``close()`` hand back the outstanding requests that will get no answer.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .codes import FLAG_ONEWAY
from .command import RemotingCommand
from . import frame
from .frame import DEFAULT_MAX_FRAME_BYTES

REQUEST = "request"
ANSWER = "answer"
STRAY = "stray"


class Outstanding(NamedTuple):
    """A request of ours still waiting for its answer."""

    opaque: int
    code: int
    deadline: float | None  # in the caller's clock; None: never expires
    context: Any  # whatever the caller attached (a Deferred, a future, a name)


class Incoming(NamedTuple):
    """One decoded frame: ``kind`` is REQUEST, ANSWER (``outstanding`` is what it answers) or STRAY."""

    kind: str
    command: RemotingCommand
    outstanding: Outstanding | None = None


def _int32(value: int) -> int:
    """``value`` wrapped into the signed 32 bits an opaque has on the wire."""
    return (value + 0x80000000) % 0x100000000 - 0x80000000


class RemotingPeer:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, first_opaque: int = 1) -> None:
        self.decoder = frame.FrameDecoder(max_frame_bytes)  # its ``buffered_bytes``: an unfinished frame's, to bound
        self._next_opaque = _int32(first_opaque)
        self._outstanding: dict[int, Outstanding] = {}

    def feed(self, data: bytes) -> list[bytes]:
        """The whole frames ``data`` completes (the rest is kept for the next call)."""
        return self.decoder.feed(data)

    def read(self, frame: bytes) -> Incoming:
        """Decode one frame and match it if it answers one of our requests."""
        command = RemotingCommand.decode(frame)
        if not command.is_response:
            return Incoming(REQUEST, command)
        return self.match(command)

    def match(self, answer: RemotingCommand) -> Incoming:
        """``answer`` (a decoded response) matched to the request of ours it answers, if any. For
        a caller that decodes frames itself and handles requests on its own fast path."""
        outstanding = self._outstanding.pop(answer.opaque, None)
        if outstanding is None:
            return Incoming(STRAY, answer)
        return Incoming(ANSWER, answer, outstanding)

    def receive(self, data: bytes) -> list[Incoming]:
        """``feed`` and ``read`` for every frame ``data`` completes."""
        return [self.read(frame) for frame in self.decoder.feed(data)]

    def request(
        self, command: RemotingCommand, *, deadline: float | None = None, context: Any = None
    ) -> tuple[int, bytes]:
        """(opaque, bytes) of ``command`` numbered with the next opaque; it is awaited until
        answered, unless one-way."""
        opaque = self._take_opaque()
        if command.opaque != opaque:
            command = command.with_opaque(opaque)
        if not command.flag & FLAG_ONEWAY:
            self._outstanding[opaque] = Outstanding(opaque, command.code, deadline, context)
        return opaque, command.encode()

    def _take_opaque(self) -> int:
        """The next opaque of ours: int32, wrapping as Java's counter does, and never one still
        awaited (``track`` may have taken it for a relayed request)."""
        outstanding = self._outstanding
        opaque = self._next_opaque
        while opaque in outstanding:
            opaque = _int32(opaque + 1)
        self._next_opaque = _int32(opaque + 1)
        return opaque

    def track(self, opaque: int, code: int, *, deadline: float | None = None, context: Any = None) -> bool:
        """Await the answer to a request numbered by someone else (a frame relayed as it is, under
        its sender's opaque); False if that opaque is already awaited, and nothing changes."""
        if opaque in self._outstanding:
            return False
        self._outstanding[opaque] = Outstanding(opaque, code, deadline, context)
        return True

    def awaited(self, opaque: int) -> Outstanding | None:
        """The request ``opaque`` answers, if one is awaited (it stays awaited: see ``forget``)."""
        return self._outstanding.get(opaque)

    def forget(self, opaque: int) -> None:
        """Stop awaiting ``opaque``: its answer was taken without ``match``."""
        del self._outstanding[opaque]

    def has_outstanding(self) -> bool:
        return bool(self._outstanding)

    def outstanding(self) -> list[Outstanding]:
        return list(self._outstanding.values())

    def expire(self, now: float) -> list[Outstanding]:
        """Forget and return the requests whose deadline is ``now`` or earlier."""
        due = [o for o in self._outstanding.values() if o.deadline is not None and o.deadline <= now]
        for o in due:
            del self._outstanding[o.opaque]
        return due

    def close(self) -> list[Outstanding]:
        """The connection is gone: every outstanding request, forgotten."""
        pending, self._outstanding = list(self._outstanding.values()), {}
        return pending
