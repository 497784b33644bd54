"""How replies leave a connection: the replies of one read together, straight to the socket when
nothing is queued, and through Twisted's buffer otherwise (order kept in every case)."""

from __future__ import annotations

import pytest
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from codec import frame as framing  # its hot names: codec.implementation rebinds them
from codec.command import RemotingCommand
from codec.errors import CodecError
from rmqproxy.net.dispatch import Dispatcher, Route
from rmqproxy.net.replies import ReplyBuffers
from rmqproxy.net.transport import Connection


class SocketTransport(StringTransport):
    """A ``StringTransport`` with the parts of ``tcp.Connection`` the flush uses: ``writeSomeData``
    takes at most ``room`` bytes per call (the socket's free buffer), and Twisted's own queue."""

    def __init__(self, room: int = 1 << 20) -> None:
        super().__init__(peerAddress=IPv4Address("TCP", "10.0.0.5", 40000))
        self.room = room
        self.sent = b""  # what went straight to the socket
        self.direct_calls = 0
        self.dataBuffer = b""
        self._tempDataBuffer: list[bytes] = []

    def writeSomeData(self, data: bytes) -> int:
        self.direct_calls += 1
        taken = bytes(data[: self.room])
        self.sent += taken
        return len(taken)


def _connection(transport: StringTransport, handler) -> Connection:
    conn = Connection(handler, task.Clock(), max_frame_bytes=1 << 20)
    conn.makeConnection(transport)
    return conn


def _requests(*opaques: int, body: bytes = b"") -> bytes:
    return b"".join(RemotingCommand(code=34, opaque=o, body=body).encode() for o in opaques)


def _opaques(data: bytes) -> list[int]:
    return [RemotingCommand.decode(p).opaque for p in framing.FrameDecoder().feed(data)]


def _echo(request: RemotingCommand, conn: Connection) -> RemotingCommand:
    return request.response(0, body=request.body)


def _answered_later(later: list[defer.Deferred]):
    """A handler whose answers come later, outside the read: each request's Deferred goes to
    ``later``, for the test to fire."""

    def held(request: RemotingCommand, conn: Connection) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        later.append(d.addCallback(lambda _: request.response(0)))
        return d

    return held


def test_the_replies_of_one_read_leave_in_one_send() -> None:
    transport = SocketTransport()
    conn = _connection(transport, _echo)
    conn.dataReceived(_requests(1, 2, 3))
    assert transport.direct_calls == 1 and transport.value() == b""
    assert _opaques(transport.sent) == [1, 2, 3]


def test_what_the_socket_does_not_take_is_queued_behind_it_in_order() -> None:
    transport = SocketTransport(room=100)
    conn = _connection(transport, _echo)
    conn.dataReceived(_requests(1, 2, 3, body=bytes(70)))
    assert len(transport.sent) == 100
    assert _opaques(transport.sent + transport.value()) == [1, 2, 3]


@pytest.mark.parametrize(
    "state",
    [{"_tempDataBuffer": [b"queued"]}, {"dataBuffer": b"queued"}, {"disconnecting": True}, {"connected": False}],
    ids=["queued", "being-sent", "closing", "closed"],
)
def test_a_socket_with_bytes_queued_or_closing_gets_replies_through_twisted(state: dict) -> None:
    """Replies never pass bytes Twisted still holds, nor touch a socket being closed."""
    transport = SocketTransport()
    conn = _connection(transport, _echo)
    for name, value in state.items():
        setattr(transport, name, value)
    conn.dataReceived(_requests(1, 2))
    assert transport.direct_calls == 0
    assert _opaques(transport.value()) == [1, 2]


def test_a_reply_made_later_goes_through_twisteds_buffer() -> None:
    """It leaves with Twisted's next write round, or with the close: a stopping server's last
    answers must not reach a client before the connection stops reading (see Server.stop)."""
    later: list[defer.Deferred] = []
    transport = SocketTransport()
    conn = _connection(transport, _answered_later(later))
    conn.dataReceived(_requests(7))
    assert transport.direct_calls == 0 and transport.value() == b""
    later[0].callback(None)
    assert transport.direct_calls == 0 and _opaques(transport.value()) == [7]


def test_test_doubles_without_a_socket_get_every_reply_through_write() -> None:
    transport = StringTransport()
    conn = _connection(transport, _echo)
    conn.dataReceived(_requests(1, 2))
    assert _opaques(transport.value()) == [1, 2]


class PausingTransport(SocketTransport):
    """Twisted's rule for a streaming producer: past ``bufferSize`` queued bytes, pause it; once
    everything queued has been sent (``drain``), resume it. The socket takes nothing."""

    bufferSize = 64 * 1024

    def __init__(self) -> None:
        super().__init__(room=0)

    def write(self, data: bytes) -> None:
        super().write(data)
        if self.producer is not None and len(self.value()) > self.bufferSize:
            self.producer.pauseProducing()

    def writeSequence(self, data: list[bytes]) -> None:
        self.write(b"".join(data))

    def drain(self) -> bytes:
        sent = self.value()
        self.clear()
        self.producer.resumeProducing()
        return sent


def test_a_paused_connection_keeps_what_it_read_and_handles_it_in_order_on_resume() -> None:
    transport = PausingTransport()
    conn = _connection(transport, _echo)
    conn.pauseProducing()
    assert transport.producerState == "paused"  # the socket is no longer read
    conn.dataReceived(_requests(1, 2))
    conn.dataReceived(_requests(3))
    assert transport.value() == b""
    conn.resumeProducing()
    assert _opaques(transport.value()) == [1, 2, 3] and transport.producerState == "producing"


def test_a_burst_of_large_replies_pauses_mid_read_and_loses_nothing() -> None:
    transport = PausingTransport()
    conn = _connection(transport, _echo)
    conn.dataReceived(_requests(*range(1, 11), body=bytes(100_000)))  # 1 MB of replies, nobody reading
    assert conn.paused and len(transport.value()) < 400_000  # flushed early, then stopped
    seen = []
    while conn.paused:
        seen += _opaques(transport.drain())
    seen += _opaques(transport.value())
    assert seen == list(range(1, 11))


def _held(transport: StringTransport, **limits: object) -> tuple[Connection, list[defer.Deferred]]:
    """A connection whose every request is answered later (as a held pull is): each Deferred in
    the list fires with the answer's body. ``limits`` go to the ``Connection``."""
    pending: list[defer.Deferred] = []

    def later(request: RemotingCommand, conn: Connection) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        pending.append(d.addCallback(lambda body: request.response(0, ext_fields={"nextBeginOffset": "9"}, body=body)))
        return d

    conn = Connection(later, task.Clock(), max_frame_bytes=1 << 20, **limits)
    conn.makeConnection(transport)
    return conn, pending


def test_past_its_in_flight_bound_a_connection_gets_system_busy_until_answers_land() -> None:
    transport = StringTransport()
    conn, pending = _held(transport, max_in_flight=3)
    conn.dataReceived(_requests(1, 2, 3, 4))
    (busy,) = [RemotingCommand.decode(p) for p in framing.FrameDecoder().feed(transport.value())]
    assert (busy.opaque, busy.code) == (4, 2) and "maxInFlightRequestsPerConnection" in busy.remark
    transport.clear()
    pending[0].callback(b"")
    conn.dataReceived(_requests(5))
    assert _opaques(transport.value()) == [1] and conn.in_flight == 3 and len(pending) == 4


def test_answers_landing_on_a_peer_that_does_not_read_stop_at_its_bound_as_system_busy() -> None:
    """Held pulls that wake while their client is not reading are written all the same: without a
    bound, 10,000 of them of 128 KiB each would take the server to over a gigabyte."""
    transport = PausingTransport()
    buffers = ReplyBuffers(per_connection=300_000, total=10 << 20)
    conn, pending = _held(transport, buffers=buffers)
    conn.dataReceived(_requests(*range(1, 11)))
    for d in pending:
        d.callback(bytes(100_000))
    assert conn.paused
    answers = [RemotingCommand.decode(p) for p in framing.FrameDecoder().feed(transport.value())]
    full = [a.opaque for a in answers if a.code == 0]
    busy = [a for a in answers if a.code == 2]
    assert len(transport.value()) < 64 * 1024 + 300_000 + 100_000 + 10 * 512
    assert full and busy and [a.opaque for a in answers] == list(range(1, 11))
    assert all(not a.body and not a.ext_fields and "maxBufferedReplyBytesPerConnection" in a.remark for a in busy)
    assert buffers.total == conn.unread > 0
    transport.drain()  # the client reads again: its bytes no longer count
    assert buffers.total == conn.unread == 0


def test_the_total_bound_is_shared_by_every_connection() -> None:
    buffers = ReplyBuffers(per_connection=1 << 30, total=250_000)
    first, second = PausingTransport(), PausingTransport()
    conn1, pending1 = _held(first, buffers=buffers)
    conn2, pending2 = _held(second, buffers=buffers)
    conn1.dataReceived(_requests(1, 2, 3))
    conn2.dataReceived(_requests(1, 2))
    for d in pending1:
        d.callback(bytes(100_000))
    assert [RemotingCommand.decode(p).code for p in framing.FrameDecoder().feed(first.value())] == [0, 0, 0]
    for d in pending2:  # the first fills the socket's share and pauses; conn1's answers took the rest
        d.callback(bytes(100_000))
    assert [RemotingCommand.decode(p).code for p in framing.FrameDecoder().feed(second.value())] == [0, 2]
    conn1.connectionLost(None)  # a closed connection's bytes are freed too
    assert buffers.total == conn2.unread


def test_dispatch_answers_a_codec_error_with_its_own_code_or_closes_when_it_says_so() -> None:
    """The codec's errors carry what to do with them: ``response_code`` to answer, or
    ``close_connection`` when the stream cannot be trusted; dispatch follows them."""

    class Busy(CodecError):
        response_code = 2

    class Torn(CodecError):
        close_connection = True

    def failing(error: type[CodecError]):
        def handler(request: RemotingCommand, header, conn) -> RemotingCommand:
            raise error("what went wrong")
        return handler

    dispatcher = Dispatcher([Route(9001, failing(Busy)), Route(9002, failing(Torn))])  # no custom headers
    transport = StringTransport()
    conn = Connection(dispatcher, task.Clock(), max_frame_bytes=1 << 20)
    conn.makeConnection(transport)
    conn.dataReceived(RemotingCommand(code=9001, opaque=1).encode())
    (answer,) = [RemotingCommand.decode(p) for p in framing.FrameDecoder().feed(transport.value())]
    assert (answer.code, answer.remark) == (2, "what went wrong")
    transport.clear()
    conn.dataReceived(RemotingCommand(code=9002, opaque=2).encode())
    assert transport.value() == b"" and transport.disconnecting
