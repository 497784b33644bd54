"""The proxy's upstream name servers (rmqproxy/proxy/upstream.py ``NameServers``) on a fake clock:
one connection at a time, to the first that answers; when it fails, every request it had in
flight is asked again of the next one, and the proxy stays with the one that answered. Dials are
fake (``FakeDialer``): a test connects, refuses or crashes each name server end as it likes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.internet import defer
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from codec.codes import RequestCode, ResponseCode
from codec.command import RemotingCommand
from codec.peer import RemotingPeer
from rmqproxy.net.transport import Connection
from rmqproxy.proxy.upstream import PROXY_FIRST_OPAQUE, Dialer, NameServers, UpstreamError

from ..server.harness import Endpoint, FakeReactor

TIMEOUT_S = 3.0


@dataclass
class Dial:
    """One dial the proxy started: where to, and the Deferred the test fires."""

    address: str
    result: defer.Deferred
    handler: Any
    on_close: Any


class FakeDialer(Dialer):
    """Records each dial instead of connecting."""

    def __init__(self, reactor: FakeReactor) -> None:
        super().__init__(reactor, max_frame_bytes=16 << 20, timeout_s=TIMEOUT_S)
        self.dials: list[Dial] = []

    def dial(self, address: str, handler: Any, on_close: Any = None) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        self.dials.append(Dial(address, d, handler, on_close))
        return d

    def refuse(self, i: int) -> None:
        """Dial ``i`` fails, as a connection to a dead name server does."""
        self.dials[i].result.errback(UpstreamError(f"cannot connect to {self.dials[i].address}: refused"))


class NameServer(Endpoint):
    """The name server's end of dial ``i``, connected: what the proxy asked, and answers."""

    def __init__(self, dialer: FakeDialer, i: int) -> None:
        dial = dialer.dials[i]
        self.address = dial.address
        host, _, port = dial.address.rpartition(":")
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", host, int(port)))
        self.conn = Connection(dial.handler, dialer.reactor, max_frame_bytes=16 << 20, on_close=dial.on_close,
                               first_opaque=PROXY_FIRST_OPAQUE)  # fmt: skip
        self.conn.makeConnection(self.transport)
        self.peer = RemotingPeer()
        self.received: list[RemotingCommand] = []
        dial.result.callback(self.conn)

    def answer_all(self) -> int:
        """Answer every request not answered yet with SUCCESS and this name server's address as the body."""
        asked = self.read()
        for request in asked:
            self.conn.dataReceived(request.response(ResponseCode.SUCCESS, body=self.address.encode()).encode())
        return len(asked)

    def crash(self) -> None:
        """The socket closes under the proxy (kill -9 of the name server, or the proxy's own close done)."""
        self.conn.connectionLost(None)


def _setup(addresses: str = "a:1;b:2") -> tuple[NameServers, FakeDialer, FakeReactor]:
    reactor = FakeReactor()
    dialer = FakeDialer(reactor)
    return NameServers(dialer, addresses), dialer, reactor


def _route(ns: NameServers) -> list[Any]:
    """A route request; the returned list gets its answer (or failure) when it comes."""
    out: list[Any] = []
    ns.request(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "T"})).addBoth(out.append)
    return out


def _answered_by(results: list[list[Any]]) -> list[str]:
    return [r[0].body.decode() if r and isinstance(r[0], RemotingCommand) else repr(r) for r in results]


def test_requests_in_flight_on_a_name_server_that_dies_are_answered_by_the_next_which_the_proxy_keeps() -> None:
    ns, dialer, reactor = _setup()
    results = [_route(ns), _route(ns)]
    first = NameServer(dialer, 0)
    assert dialer.dials[0].address == "a:1" and len(first.read()) == 2
    first.crash()  # kill -9: both requests fail at once
    assert [d.address for d in dialer.dials] == ["a:1", "b:2"]  # one dial for both
    second = NameServer(dialer, 1)
    assert second.answer_all() == 2
    assert _answered_by(results) == ["b:2", "b:2"]
    second.crash()  # an idle connection closed (Apache's name server closes them after 120 s)
    later = _route(ns)
    assert dialer.dials[2].address == "b:2"  # the one that answered, not back to the dead one
    NameServer(dialer, 2).answer_all()
    assert _answered_by([later]) == ["b:2"]


def test_requests_waiting_on_a_refused_dial_go_to_the_next_name_server_in_one_dial() -> None:
    ns, dialer, reactor = _setup("a:1;b:2;c:3")
    results = [_route(ns), _route(ns), _route(ns)]
    dialer.refuse(0)
    assert [d.address for d in dialer.dials] == ["a:1", "b:2"]
    NameServer(dialer, 1).answer_all()
    assert _answered_by(results) == ["b:2"] * 3


def test_a_late_failure_on_the_name_server_left_behind_does_not_close_the_next_one() -> None:
    """A name server that stops answering: the first request to time out moves the proxy on; the
    others in flight there fail only once that socket has closed, which may be after the next name
    server is connected: they are asked again there, and that connection is left open."""
    ns, dialer, reactor = _setup()
    early = _route(ns)
    hung = NameServer(dialer, 0)
    reactor.advance(1)
    late = _route(ns)
    assert len(hung.read()) == 2
    reactor.advance(TIMEOUT_S - 1)  # the early request's deadline: the proxy closes this connection
    assert hung.transport.disconnecting and dialer.dials[1].address == "b:2"
    second = NameServer(dialer, 1)
    hung.crash()  # its socket closes now, with the early request in flight on the next name server
    assert not second.transport.disconnecting  # closing it would fail the early one for good: SYSTEM_ERROR
    assert second.answer_all() == 2 and len(dialer.dials) == 2
    assert _answered_by([early, late]) == ["b:2", "b:2"]


def test_with_every_name_server_down_the_request_fails_after_trying_each_once() -> None:
    ns, dialer, reactor = _setup()
    result = _route(ns)
    dialer.refuse(0)
    dialer.refuse(1)
    assert [d.address for d in dialer.dials] == ["a:1", "b:2"]
    assert result[0].check(UpstreamError) and "b:2" in result[0].getErrorMessage()
    again = _route(ns)
    assert dialer.dials[2].address == "a:1"  # the next request starts over: one may be back
    NameServer(dialer, 2).answer_all()
    assert _answered_by([again]) == ["a:1"]
