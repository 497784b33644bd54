"""Frames begun and not finished, over every connection (``UnfinishedFrames``): past their total
bound the connection with the largest is closed, one whose frame gets no byte for the stall
timeout is closed, and the others are served meanwhile. Connections over ``StringTransport``,
time on a ``task.Clock``."""

from __future__ import annotations

import pytest
from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from codec import frame as framing  # its hot names: codec.implementation rebinds them
from codec.command import RemotingCommand
from rmqproxy.core.config import Config, load
from rmqproxy.net.rejects import FRAME_STALLED, UNFINISHED_FRAMES_FULL
from rmqproxy.net.transport import Connection
from rmqproxy.net.unfinished import UnfinishedFrames

STALL_S = 30.0


class Harness:
    """Connections sharing one ``UnfinishedFrames``; their rejections are kept in ``rejected``."""

    def __init__(self, limit: int = 250_000, stall_s: float = STALL_S) -> None:
        self.clock = task.Clock()
        self.frames = UnfinishedFrames(self.clock, limit, stall_s)
        self.rejected: list[tuple[str, dict]] = []

    def reject(self, reason: str, fmt: str, **fields: object) -> None:
        self.rejected.append((reason, fields))

    def connect(self) -> tuple[Connection, StringTransport]:
        conn = Connection(_echo, self.clock, max_frame_bytes=1 << 20, on_reject=self.reject, frames=self.frames)
        transport = StringTransport(peerAddress=IPv4Address("TCP", "10.0.0.5", 40000))
        conn.makeConnection(transport)
        return conn, transport

    def reasons(self) -> list[str]:
        return [reason for reason, _ in self.rejected]


def _echo(request: RemotingCommand, conn: Connection) -> RemotingCommand:
    return request.response(0, body=request.body)


def _request(opaque: int, body_size: int = 0) -> bytes:
    return RemotingCommand(code=34, opaque=opaque, body=bytes(body_size)).encode()


def _opaques(transport: StringTransport) -> list[int]:
    return [RemotingCommand.decode(p).opaque for p in framing.FrameDecoder(1 << 24).feed(transport.value())]


def _closed(transport: StringTransport) -> bool:
    return transport.disconnecting


def test_past_the_total_the_connection_with_the_largest_unfinished_frame_is_closed_and_the_others_served() -> None:
    h = Harness(limit=250_000)
    (a, ta), (b, tb), (c, tc) = h.connect(), h.connect(), h.connect()
    frame_a, frame_b, frame_c = _request(1, 150_000), _request(2, 150_000), _request(3, 150_000)
    a.dataReceived(frame_a[:100_000])
    b.dataReceived(frame_b[:120_000])
    assert h.frames.total == 220_000 and not h.rejected
    c.dataReceived(frame_c[:40_000])  # 260,000 in all: b holds the most
    assert _closed(tb) and not _closed(ta) and not _closed(tc)
    assert h.reasons() == [UNFINISHED_FRAMES_FULL] and h.rejected[0][1]["size"] == 120_000
    assert h.frames.total == 140_000 == a.unfinished + c.unfinished and b.unfinished == 0
    a.dataReceived(frame_a[100_000:] + _request(4))  # the others finish their frames and are answered
    c.dataReceived(frame_c[40_000:])
    assert _opaques(ta) == [1, 4] and _opaques(tc) == [3]
    assert h.frames.total == 0 and not h.frames.holders


def test_the_connection_whose_read_passes_the_total_is_closed_when_its_frame_is_the_largest() -> None:
    h = Harness(limit=100_000)
    (a, ta), (b, tb) = h.connect(), h.connect()
    a.dataReceived(_request(1, 150_000)[:30_000])
    b.dataReceived(_request(2) + _request(3, 150_000)[:80_000])  # its whole request is not handled: it is closed
    assert _closed(tb) and not _closed(ta) and _opaques(tb) == []
    assert h.frames.total == 30_000 and h.reasons() == [UNFINISHED_FRAMES_FULL]


def test_a_frame_that_gets_no_byte_for_the_stall_timeout_closes_only_its_connection() -> None:
    h = Harness()
    (a, ta), (b, tb), (c, tc) = h.connect(), h.connect(), h.connect()
    frame_a, frame_b = _request(1, 10_000), _request(2, 10_000)
    a.dataReceived(frame_a[:1000])
    b.dataReceived(frame_b[:1000])
    c.dataReceived(_request(3))  # between frames: never stalled
    h.clock.advance(20)
    b.dataReceived(frame_b[1000:2000])  # progress: its stall clock starts again
    h.clock.advance(STALL_S - 20)
    assert _closed(ta) and not _closed(tb) and not _closed(tc)
    assert h.reasons() == [FRAME_STALLED] and h.rejected[0][1]["size"] == 1000
    assert h.frames.total == 2000
    h.clock.advance(19)
    b.dataReceived(frame_b[2000:])  # finished: it holds nothing, and nothing waits on the clock
    assert _opaques(tb) == [2] and h.frames.total == 0 and h.clock.getDelayedCalls() == []
    h.clock.advance(STALL_S * 2)
    assert not _closed(tb) and not _closed(tc) and h.reasons() == [FRAME_STALLED]


def test_a_connection_is_closed_exactly_when_its_frame_has_waited_the_timeout() -> None:
    h = Harness()
    conn, transport = h.connect()
    h.clock.advance(0.05)  # off any grid
    conn.dataReceived(_request(1, 100)[:50])
    h.clock.advance(STALL_S - 0.01)
    assert not _closed(transport)
    h.clock.advance(0.01)
    assert _closed(transport) and h.reasons() == [FRAME_STALLED]


def test_between_frames_nothing_is_counted_and_nothing_waits_on_the_clock() -> None:
    h = Harness()
    conn, transport = h.connect()
    conn.dataReceived(_request(1) + _request(2, 5000))
    assert h.frames.total == 0 and conn.unfinished == 0 and h.clock.getDelayedCalls() == []
    h.clock.advance(STALL_S * 3)
    assert not _closed(transport) and _opaques(transport) == [1, 2]


def test_a_closed_connection_releases_its_unfinished_bytes() -> None:
    h = Harness()
    (a, _), (b, _) = h.connect(), h.connect()
    a.dataReceived(_request(1, 10_000)[:4000])
    b.dataReceived(_request(2, 10_000)[:6000])
    a.connectionLost(None)
    assert h.frames.total == 6000 and h.frames.holders == {b}
    b.connectionLost(None)
    assert h.frames.total == 0 and not h.frames.holders and h.clock.getDelayedCalls() == []


def test_a_frame_split_across_reads_is_counted_as_it_grows_and_released_when_finished() -> None:
    h = Harness()
    conn, transport = h.connect()
    frame = _request(1, 100_000)
    for start in range(0, len(frame) - 1000, 1000):
        conn.dataReceived(frame[start : start + 1000])
        assert h.frames.total == conn.unfinished == start + 1000
    conn.dataReceived(frame[len(frame) // 1000 * 1000 :] + _request(2, 300)[:100])  # finished, and the next begun
    assert _opaques(transport) == [1] and h.frames.total == 100


def test_a_connection_we_stopped_reading_is_not_stalled_and_its_clock_restarts_when_we_read_again() -> None:
    """Its client is not reading our replies, so we are not reading it: the wait is ours."""
    h = Harness()
    conn, transport = h.connect()
    conn.dataReceived(_request(1, 10_000)[:500])
    conn.pauseProducing()
    h.clock.advance(STALL_S * 2)
    assert not _closed(transport)
    conn.resumeProducing()
    h.clock.advance(STALL_S - 1)
    assert not _closed(transport)
    h.clock.advance(1)
    assert _closed(transport) and h.reasons() == [FRAME_STALLED]


def test_new_bounds_apply_at_once_to_the_frames_unfinished_now() -> None:
    h = Harness(limit=1 << 20)
    (a, ta), (b, tb) = h.connect(), h.connect()
    a.dataReceived(_request(1, 100_000)[:60_000])
    b.dataReceived(_request(2, 100_000)[:50_000])
    h.clock.advance(10)
    b.dataReceived(_request(2, 100_000)[50_000:51_000])
    h.frames.configure(100_000, STALL_S)  # 111,000 held: the largest goes
    assert _closed(ta) and not _closed(tb) and h.reasons() == [UNFINISHED_FRAMES_FULL]
    h.frames.configure(100_000, 5.0)  # b got a byte 0 s ago: 5 s to go
    assert not _closed(tb)
    h.clock.advance(5)
    assert _closed(tb) and h.reasons() == [UNFINISHED_FRAMES_FULL, FRAME_STALLED]


def test_a_stall_timeout_of_zero_never_closes() -> None:
    h = Harness(stall_s=0)
    conn, transport = h.connect()
    conn.dataReceived(_request(1, 1000)[:10])
    assert h.clock.getDelayedCalls() == []
    h.clock.advance(3600)
    assert not _closed(transport)


def test_the_decoder_counts_what_it_holds_after_dropping_what_it_handed_out() -> None:
    decoder = framing.FrameDecoder(1 << 20)
    whole = _request(1, 70_000)
    decoder.feed(whole + whole + _request(2, 1000)[:300])  # 140 KB handed out: the buffer is compacted
    assert decoder.buffered_bytes == 300


def test_the_keys_parse_are_checked_and_default_to_the_issue_bounds(tmp_path) -> None:
    assert (Config().max_unfinished_frame_bytes, Config().frame_stall_timeout_ms) == (256 << 20, 30_000)
    conf = tmp_path / "broker.conf"
    conf.write_text("maxUnfinishedFrameBytes=33554432\nframeStallTimeoutMillis=5000\n")
    config = load(conf)
    assert (config.max_unfinished_frame_bytes, config.frame_stall_timeout_ms) == (32 << 20, 5000)
    with pytest.raises(ValueError, match="maxUnfinishedFrameBytes .* must be at least maxFrameSize"):
        Config(max_unfinished_frame_bytes=1 << 20)
    with pytest.raises(ValueError, match="frameStallTimeoutMillis must be 0 or more"):
        Config(frame_stall_timeout_ms=-1)
