"""How replies leave a connection: the replies of one read together, straight to the socket when
nothing is queued, and through Twisted's buffer otherwise (order kept in every case)."""

from __future__ import annotations

import pytest
from twisted.internet import defer, task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from codec.command import RemotingCommand
from codec.frame import FrameDecoder
from rmqproxy.transport import Connection


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
    return [RemotingCommand.decode(p).opaque for p in FrameDecoder().feed(data)]


def _echo(request: RemotingCommand, conn: Connection) -> RemotingCommand:
    return request.response(0, body=request.body)


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
    later: list[defer.Deferred] = []

    def held(request: RemotingCommand, conn: Connection) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        later.append(d.addCallback(lambda _: request.response(0)))
        return d

    transport = SocketTransport()
    conn = _connection(transport, held)
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


def test_past_its_in_flight_bound_a_connection_gets_system_busy_until_answers_land() -> None:
    pending: list[defer.Deferred] = []

    def later(request: RemotingCommand, conn: Connection) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        pending.append(d.addCallback(lambda _: request.response(0)))
        return d

    transport = StringTransport()
    conn = Connection(later, task.Clock(), max_frame_bytes=1 << 20, max_in_flight=3)
    conn.makeConnection(transport)
    conn.dataReceived(_requests(1, 2, 3, 4))
    (busy,) = [RemotingCommand.decode(p) for p in FrameDecoder().feed(transport.value())]
    assert (busy.opaque, busy.code) == (4, 2) and "maxInFlightRequestsPerConnection" in busy.remark
    transport.clear()
    pending[0].callback(None)
    conn.dataReceived(_requests(5))
    assert _opaques(transport.value()) == [1] and conn.in_flight == 3 and len(pending) == 4
