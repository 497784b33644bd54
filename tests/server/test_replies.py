"""``ReplyWriter`` alone, without a ``Connection``: a read's replies in one send (early past
``REPLY_FLUSH_BYTES``), writes held for the end of another connection's read (``WriteBatch``),
and the bounds on what a peer that is not reading costs (``ReplyBuffers``, SYSTEM_BUSY)."""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from codec import frame as framing  # its hot names: codec.implementation rebinds them
from codec.codes import ResponseCode
from codec.command import RemotingCommand
from rmqproxy.net.rejects import REPLY_BUFFER_FULL
from rmqproxy.net.replies import REPLY_FLUSH_BYTES, ReplyBuffers, ReplyWriter, WriteBatch


class SocketTransport(StringTransport):
    """A ``StringTransport`` with the parts of ``tcp.Connection`` that ``sockwrite`` uses: what
    ``writeSomeData`` takes went straight to the socket (``sent``); the rest is Twisted's queue."""

    def __init__(self) -> None:
        super().__init__(peerAddress=IPv4Address("TCP", "10.0.0.5", 40000))
        self.sent = b""
        self.direct_calls = 0
        self.dataBuffer = b""
        self._tempDataBuffer: list[bytes] = []

    def writeSomeData(self, data: bytes) -> int:
        self.direct_calls += 1
        self.sent += bytes(data)
        return len(data)


def _writer(transport: StringTransport, buffers: ReplyBuffers | None = None, batch: WriteBatch | None = None,
            rejected: list | None = None) -> ReplyWriter:  # fmt: skip
    """A writer attached to ``transport``; its REPLY_BUFFER_FULL refusals go to ``rejected``."""
    reject = None if rejected is None else (lambda reason, fmt, **fields: rejected.append((reason, fields)))
    writer = ReplyWriter(buffers or ReplyBuffers(1 << 20, 1 << 30), batch, reject)
    writer.attach(transport, "<peer 10.0.0.5:40000>")
    return writer


def _answer(opaque: int, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code=11, opaque=opaque).response(0, ext_fields={"nextBeginOffset": "9"} if body else None,
                                                            body=body)  # fmt: skip


def _decoded(data: bytes) -> list[RemotingCommand]:
    return [RemotingCommand.decode(p) for p in framing.FrameDecoder(1 << 24).feed(data)]


def _opaques(data: bytes) -> list[int]:
    return [c.opaque for c in _decoded(data)]


def test_the_replies_of_one_read_leave_in_one_send_when_it_ends() -> None:
    transport = SocketTransport()
    writer = _writer(transport)
    writer.start_read()
    for opaque in (1, 2, 3):
        writer.write_command(_answer(opaque, b"x" * opaque))
    assert transport.direct_calls == 0 and transport.sent == b"" and transport.value() == b""
    writer.end_read()
    assert transport.direct_calls == 1 and _opaques(transport.sent) == [1, 2, 3]
    assert [c.body for c in _decoded(transport.sent)] == [b"x", b"xx", b"xxx"]


def test_replies_past_reply_flush_bytes_leave_before_the_read_ends_and_the_rest_at_its_end() -> None:
    transport = SocketTransport()
    writer = _writer(transport)
    big = REPLY_FLUSH_BYTES // 2 + 1
    writer.start_read()
    writer.write_command(_answer(1, bytes(big)))
    assert transport.direct_calls == 0
    writer.write_command(_answer(2, bytes(big)))  # past the bound: both leave now, in one send
    assert transport.direct_calls == 1 and _opaques(transport.sent) == [1, 2]
    writer.write_command(_answer(3, bytes(10)))
    writer.write_command(_answer(4))
    assert transport.direct_calls == 1
    writer.end_read()
    assert transport.direct_calls == 2 and _opaques(transport.sent) == [1, 2, 3, 4]


def test_a_late_answer_outside_any_read_goes_through_twisteds_buffer() -> None:
    transport = SocketTransport()
    writer = _writer(transport, batch=WriteBatch())
    writer.write_command(_answer(7, b"body"))
    writer.write_command(_answer(8))
    assert transport.direct_calls == 0 and _opaques(transport.value()) == [7, 8]


def test_writes_during_another_connections_read_wait_for_the_batch_and_leave_in_one_send() -> None:
    batch = WriteBatch()
    reading, other = SocketTransport(), SocketTransport()
    reader, writer = _writer(reading, batch=batch), _writer(other, batch=batch)
    reader.start_read()
    reader.start_read()  # a read handled inside another (depth 2): the batch ends with the outermost
    writer.write_command(_answer(1, b"relayed"))
    writer.write_request(RemotingCommand(code=40, opaque=2).encode())
    writer.write_command(_answer(3))
    reader.end_read()
    assert batch.depth == 1 and other.direct_calls == 0 and other.value() == b""
    reader.end_read()
    assert batch.depth == 0 and batch.dirty == []
    assert other.direct_calls == 1 and _opaques(other.sent) == [1, 2, 3] and other.value() == b""


def test_a_closed_writer_writes_nothing() -> None:
    transport = SocketTransport()
    unattached = ReplyWriter(ReplyBuffers(1 << 20, 1 << 30))
    unattached.write_command(_answer(1))
    writer = _writer(transport, batch=WriteBatch())
    writer.open = False
    writer.write_command(_answer(2))
    writer.start_read()
    writer.end_read()
    assert transport.direct_calls == 0 and transport.value() == b""


def test_a_paused_peer_gets_system_busy_for_an_answer_with_a_body_past_its_bound() -> None:
    transport = StringTransport()
    buffers = ReplyBuffers(per_connection=2_000, total=1 << 30)
    rejected: list = []
    writer = _writer(transport, buffers, rejected=rejected)
    assert writer.pause() and not writer.pause()
    writer.write_command(_answer(1, bytes(1_000)))  # 1,256 counted: within the bound
    writer.write_command(_answer(2, bytes(1_000)))  # 2,512 would pass it
    first, busy = _decoded(transport.value())
    assert (first.code, len(first.body)) == (0, 1_000)
    assert (busy.opaque, busy.code, busy.body, busy.ext_fields) == (2, ResponseCode.SYSTEM_BUSY, b"", None)
    assert "maxBufferedReplyBytesPerConnection" in busy.remark and "1256 bytes" in busy.remark
    assert rejected == [(REPLY_BUFFER_FULL, {"conn": "<peer 10.0.0.5:40000>", "n": 1256, "size": 1256})]
    assert writer.unread == buffers.total == 1256 + 256  # the SYSTEM_BUSY counts too


def test_requests_and_bodiless_answers_to_a_paused_peer_always_go_and_count() -> None:
    transport = StringTransport()
    buffers = ReplyBuffers(per_connection=100, total=100)
    writer = _writer(transport, buffers, rejected=[])
    writer.pause()
    request = RemotingCommand(code=40, opaque=1, body=bytes(500))
    writer.write_command(request)
    writer.write_command(_answer(2))
    writer.write_request(RemotingCommand(code=307, opaque=3, body=bytes(300)).encode())
    codes = [(c.opaque, c.code, len(c.body)) for c in _decoded(transport.value())]
    assert codes == [(1, 40, 500), (2, 0, 0), (3, 307, 300)]
    assert writer.unread == buffers.total > 100


def test_the_total_bound_is_shared_and_drained_or_closed_peers_stop_counting() -> None:
    buffers = ReplyBuffers(per_connection=1 << 30, total=1_500)
    first, second = StringTransport(), StringTransport()
    a, b = _writer(first, buffers), _writer(second, buffers)
    a.pause()
    b.pause()
    a.write_command(_answer(1, bytes(1_000)))
    b.write_command(_answer(2, bytes(1_000)))  # the total has no room left
    assert [c.code for c in _decoded(second.value())] == [ResponseCode.SYSTEM_BUSY]
    assert buffers.total == a.unread + b.unread
    a.resume()  # a's peer read everything
    assert (a.unread, a.paused, buffers.total) == (0, False, b.unread)
    b.close()  # a lost connection's bytes are freed too
    assert (b.unread, b.open, buffers.total) == (0, False, 0)
    b.write_command(_answer(3, bytes(10)))
    assert len(_decoded(second.value())) == 1
