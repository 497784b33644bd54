"""Frame splitting: the 4-byte big-endian length prefix of RocketMQ remoting.

A frame on the wire is ``total_length:int32`` followed by ``total_length`` bytes (docs/protocol.md, Frames).
``FrameDecoder`` is fed arbitrary chunks and returns the payloads (the bytes after the prefix) of
every complete frame. The cap is checked from the prefix alone, before any of the frame is
buffered, so a peer can make us hold at most ``max_frame_bytes`` plus one chunk. After an error the
stream is out of sync: the decoder stays failed and the connection must be closed.
"""

from __future__ import annotations

import struct

from .errors import FrameError

#: Java's NettyDecoder cap, ``com.rocketmq.remoting.frameMaxLength``, counts the length field
#: itself: 16 MiB in 4.9.8 and 5.3.1 alike.
DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024

#: The smallest payload: the int32 that carries serialize type and header length.
MIN_PAYLOAD_BYTES = 4

_INT32 = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")


class FrameDecoder:
    """Incremental frame splitter: ``feed(chunk)`` returns every frame payload completed by it."""

    __slots__ = ("max_frame_bytes", "buffered_bytes", "_buf", "_pos", "_failed")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 4 + MIN_PAYLOAD_BYTES:
            raise ValueError("max_frame_bytes must allow at least an empty header")
        self.max_frame_bytes = max_frame_bytes
        self.buffered_bytes = 0  # bytes held for an incomplete frame, as of the last ``feed``
        self._buf = bytearray()
        self._pos = 0
        self._failed: FrameError | None = None

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data`` and return the payloads of all frames now complete, in order."""
        if self._failed is not None:
            raise self._failed
        buf = self._buf
        buf += data
        pos = self._pos
        end = len(buf)
        frames: list[bytes] = []
        limit = self.max_frame_bytes - 4
        while end - pos >= 4:
            (length,) = _INT32.unpack_from(buf, pos)
            if length < MIN_PAYLOAD_BYTES or length > limit:
                self._failed = FrameError(
                    f"frame length {length} outside [{MIN_PAYLOAD_BYTES}, {limit}]",
                    where=f"stream offset of frame +{pos}",
                )
                del buf[:]
                self._pos = 0
                self.buffered_bytes = 0
                raise self._failed
            if end - pos - 4 < length:
                break
            frames.append(bytes(buf[pos + 4 : pos + 4 + length]))
            pos += 4 + length
        if pos == end:
            del buf[:]
            pos = 0
        elif pos > 65536 and pos * 2 > end:
            del buf[:pos]
            pos = 0
        self._pos = pos
        self.buffered_bytes = len(buf) - pos
        return frames


def encode_frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """Whole frame: length prefix, serialize type with header length, header, body."""
    return b"".join((frame_prefix(serialize_type, len(header), len(body)), header, body))


def frame_prefix(serialize_type: int, header_len: int, body_len: int) -> bytes:
    """The 8 bytes before a header: total length, then serialize type with header length. A
    writer sends prefix, header and body separately, so a large body is never copied."""
    if header_len > 0xFFFFFF:
        raise FrameError(f"header of {header_len} bytes exceeds the 24-bit header length")
    return _PREFIX.pack(4 + header_len + body_len, (serialize_type << 24) | header_len)
