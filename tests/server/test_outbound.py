"""``OutboundRequests`` alone, on a ``task.Clock``: the server's own requests are numbered by the
peer, answered by opaque, time out exactly when due (``request``) or at the next once-a-second
sweep (``call``), and all fail when the connection is lost."""

from __future__ import annotations

import pytest
from twisted.internet import task
from twisted.internet.testing import StringTransport

from codec import frame as framing  # its hot names: codec.implementation rebinds them
from codec.codes import FLAG_ONEWAY
from codec.command import RemotingCommand
from codec.peer import RemotingPeer
from rmqproxy.net.outbound import SWEEP_S, OutboundRequests, RequestTimeout
from rmqproxy.net.replies import ReplyBuffers, ReplyWriter


class Setup:
    """One peer's outbound requests, written to a ``StringTransport``."""

    def __init__(self) -> None:
        self.clock = task.Clock()
        self.peer = RemotingPeer()
        self.transport = StringTransport()
        self.writer = ReplyWriter(ReplyBuffers(1 << 20, 1 << 30))
        self.writer.attach(self.transport, "<peer>")
        self.out = OutboundRequests(self.peer, self.clock, self.writer)
        self._frames = framing.FrameDecoder()

    def sent(self) -> list[RemotingCommand]:
        """The commands written since the last call."""
        data = self.transport.value()
        self.transport.clear()
        return [RemotingCommand.decode(p) for p in self._frames.feed(data)]

    def answer(self, request: RemotingCommand, remark: str = "done") -> RemotingCommand:
        """The peer's answer to ``request``, handed in as the connection's read would."""
        answer = request.response(0, remark)
        self.out.answered(self.peer.match(answer))
        return answer


@pytest.fixture
def s() -> Setup:
    return Setup()


def _ask(code: int = 307) -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields={"consumerGroup": "g"})


def test_a_request_fires_with_its_answer_and_its_timer_is_cancelled(s: Setup) -> None:
    results: list = []
    s.out.request(_ask(), 3.0).addBoth(results.append)
    (sent,) = s.sent()
    assert (sent.code, sent.is_oneway) == (307, False) and results == []
    answer = s.answer(sent)
    assert results == [answer] and s.clock.getDelayedCalls() == [] and not s.peer.has_outstanding()


def test_a_request_times_out_exactly_at_its_timeout_and_a_late_answer_is_dropped(s: Setup) -> None:
    results: list = []
    s.out.request(_ask(), 2.0).addErrback(lambda f: results.append(f.value))
    (sent,) = s.sent()
    s.clock.advance(1.75)
    assert results == []
    s.clock.advance(0.25)
    (error,) = results
    assert isinstance(error, RequestTimeout) and f"<peer> did not answer request {sent.opaque}" == str(error)
    s.answer(sent)  # unmatched now: nothing fires twice
    assert len(results) == 1 and s.clock.getDelayedCalls() == []


def test_calls_share_one_sweep_a_second_and_time_out_at_the_first_sweep_past_their_deadline(s: Setup) -> None:
    results: list = []
    s.out.call(_ask(), 2.5, lambda result, tag: results.append((tag, result)), "late")
    s.out.call(_ask(), 10.0, lambda result, tag: results.append((tag, result)), "answered")
    late, answered = s.sent()
    assert [c.getTime() for c in s.clock.getDelayedCalls()] == [SWEEP_S]  # one sweep, no timer per call
    s.clock.advance(SWEEP_S)
    s.clock.advance(SWEEP_S)
    assert results == [] and [c.getTime() for c in s.clock.getDelayedCalls()] == [3 * SWEEP_S]
    s.clock.advance(SWEEP_S)
    ((tag, error),) = results
    assert tag == "late" and isinstance(error, RequestTimeout) and str(late.opaque) in str(error)
    reply = s.answer(answered)
    assert results[1] == ("answered", reply)
    s.clock.advance(SWEEP_S)  # nothing outstanding: the sweep stops coming back
    assert s.clock.getDelayedCalls() == []


def test_every_outstanding_request_fails_with_request_timeout_when_the_connection_is_lost(s: Setup) -> None:
    results: list = []
    s.out.request(_ask(), 30.0).addErrback(lambda f: results.append(("request", f.value)))
    s.out.call(_ask(), 30.0, lambda result: results.append(("call", result)))
    s.writer.close()
    s.out.close()
    assert [tag for tag, _ in results] == ["request", "call"]
    assert all(isinstance(e, RequestTimeout) and str(e) == "<peer> closed before answering" for _, e in results)
    assert s.clock.getDelayedCalls() == [] and not s.peer.has_outstanding()


def test_requests_on_a_closed_connection_fail_at_once_and_write_nothing(s: Setup) -> None:
    s.writer.open = False
    results: list = []
    s.out.request(_ask(), 3.0).addErrback(lambda f: results.append(f.value))
    s.out.call(_ask(), 3.0, results.append)
    s.out.send_oneway(_ask(40))
    assert [str(e) for e in results] == ["<peer> is closed", "<peer> is closed"]
    assert all(isinstance(e, RequestTimeout) for e in results)
    assert s.transport.value() == b"" and s.clock.getDelayedCalls() == []


def test_a_oneway_request_carries_flag_0x2_and_is_never_awaited(s: Setup) -> None:
    s.out.send_oneway(_ask(40))
    s.out.send_oneway(_ask(40))
    first, second = s.sent()
    assert first.flag & FLAG_ONEWAY and second.flag & FLAG_ONEWAY and not first.is_response
    assert second.opaque == first.opaque + 1  # numbered all the same
    assert not s.peer.has_outstanding() and s.clock.getDelayedCalls() == []


def test_a_request_made_during_a_read_leaves_in_order_with_its_replies(s: Setup) -> None:
    s.writer.start_read()
    s.writer.write_command(RemotingCommand(code=34, opaque=900).response(0))
    s.out.send_oneway(_ask(40))
    s.writer.write_command(RemotingCommand(code=34, opaque=901).response(0))
    assert s.transport.value() == b""
    s.writer.end_read()
    assert [(c.code, c.is_response) for c in s.sent()] == [(0, True), (40, False), (0, True)]
